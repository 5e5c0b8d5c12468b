"""torch's own ops in kcontract's calling conventions, where the table needs a wrapper."""
import torch
import torch.nn.functional as F


def layernorm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def attention(q, k, v, causal=False):
    """F.scaled_dot_product_attention; kcontract's causal mask is aligned bottom-right."""
    if causal:
        S, T = q.shape[-2], k.shape[-2]
        mask = torch.ones(S, T, dtype=torch.bool, device=q.device).tril(diagonal=T - S)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return F.scaled_dot_product_attention(q, k, v)


def linear_gelu(x, w, b):
    """No fused op in torch's eager API: the composition F.gelu(x @ w + b)."""
    return F.gelu(x @ w + b)


def cast(x, dtype=None):
    return x.to(getattr(torch, str(dtype)))
