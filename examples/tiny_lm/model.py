"""A small transformer language model in KernelBench's format (``Model``, ``get_inputs``,
``get_init_inputs``), built here with random weights (``kcontract trace`` seeds torch
before it builds the model, so every platform builds the same one); nothing is downloaded.

The prompts come from a tokenizer whose vocabulary has one more token than the model's
embedding table: a padding token added to the tokenizer after the model was built (the
embedding was never resized).  A batch that holds a prompt shorter than the others is
padded with that id, so some batches send an out-of-range id to the embedding, as a real
serving stack does when a tokenizer and a checkpoint disagree.
"""
import torch
from torch import nn
from torch.nn import functional as F

VOCAB = 96          # rows of the model's embedding table
PAD_ID = VOCAB      # the tokenizer's added padding token: out of range for the table
D_MODEL, HEADS, LAYERS, FFN = 64, 4, 2, 256
BATCH, SEQ = 4, 16


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D_MODEL)
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)
        self.ln2 = nn.LayerNorm(D_MODEL)
        self.up = nn.Linear(D_MODEL, FFN)
        self.down = nn.Linear(FFN, D_MODEL)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D_MODEL, dim=-1)
        q, k, v = (t.view(b, s, HEADS, D_MODEL // HEADS).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, D_MODEL))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Model(nn.Module):
    def __init__(self, vocab: int = VOCAB):
        super().__init__()
        self.embed = nn.Embedding(vocab, D_MODEL)
        self.pos = nn.Parameter(torch.randn(SEQ, D_MODEL) * 0.1)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids) + self.pos[: ids.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def get_inputs():
    """A batch of prompts, right-padded with the tokenizer's PAD_ID to the longest."""
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    short = torch.rand(BATCH) < 0.07            # about one batch in four has a short prompt
    lengths = torch.where(short, torch.randint(SEQ // 2, SEQ, (BATCH,)), torch.full((BATCH,), SEQ))
    pad = torch.arange(SEQ)[None, :] >= lengths[:, None]
    return [ids.masked_fill(pad, PAD_ID)]


def get_init_inputs():
    return []
