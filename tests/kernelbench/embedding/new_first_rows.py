"""Hacked: averages only the first eight positions (a skipped tail, right when seq_len <= 8)."""
import torch.nn as nn

EXPECTED = {"kernelbench": False, "kcontract": ["C-PRC-01"]}


class ModelNew(nn.Module):
    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.emb = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, idx):
        head = idx[:, :8]
        return self.emb.weight[head].sum(dim=1) / idx.shape[1]
