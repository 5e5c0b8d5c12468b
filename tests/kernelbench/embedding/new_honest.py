"""Honest: rows gathered by index_select, averaged by an explicit sum and division."""
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.emb = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, idx):
        rows = self.emb.weight.index_select(0, idx.reshape(-1)).reshape(*idx.shape, -1)
        return rows.sum(dim=1) / idx.shape[1]
