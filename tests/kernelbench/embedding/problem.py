"""Integer inputs: an embedding lookup followed by a mean over the sequence (level 1 style)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.emb = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, idx):
        return self.emb(idx).mean(dim=1)


batch_size = 8
seq_len = 12
num_embeddings = 40
embedding_dim = 24


def get_inputs():
    return [torch.randint(0, num_embeddings, (batch_size, seq_len))]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
