"""The stack's own ops as kcontract kernels, for ``kcontract trace --check``: each calls
torch the way a model does (``torch.matmul``, ``F.layer_norm``, ...), in the trace worker
after the prelude, so the check measures the kernels the traced model ran."""
from __future__ import annotations

import torch
from torch.nn import functional as F


def matmul(a, b):
    return torch.matmul(a, b)


def layernorm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def softmax(x):
    return torch.softmax(x, dim=-1)


def gelu(x):
    return F.gelu(x)


def sum(x):  # noqa: A001 - the op's name
    return x.sum(dim=-1)


def embedding(table, indices):
    return F.embedding(indices, table)


def attention(q, k, v, causal=False):
    S, T = q.shape[-2], k.shape[-2]
    if causal and S != T:  # kcontract's causal mask is aligned bottom-right
        mask = torch.ones(S, T, dtype=torch.bool, device=q.device).tril(T - S)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def cast(x, dtype="float32"):
    return x.to(getattr(torch, dtype))
