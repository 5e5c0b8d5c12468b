"""torch's own kernels in kcontract's calling conventions: what the normative suite says
about the library every other kernel is compared against."""
import torch
import torch.nn.functional as F


def matmul(a, b):
    return torch.matmul(a, b)


def sum(x):  # noqa: A001 - the op's name
    return torch.sum(x, dim=-1)


def softmax(x):
    return torch.softmax(x, dim=-1)


def layernorm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def attention(q, k, v, causal=False):
    if causal:  # kcontract's convention: the mask aligned to the bottom-right corner
        S, T = q.shape[-2], k.shape[-2]
        mask = torch.ones(S, T, dtype=torch.bool, device=q.device).tril(diagonal=T - S)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return F.scaled_dot_product_attention(q, k, v)


def embedding(table, indices):
    return F.embedding(indices, table)


def gelu(x):
    return F.gelu(x)


def linear_gelu(x, w, b):
    return F.gelu(x @ w + b)


def cast(x, dtype=None):
    return x.to(getattr(torch, str(dtype)))
