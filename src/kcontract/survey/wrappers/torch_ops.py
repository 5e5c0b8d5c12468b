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


def rmsnorm(x, weight, eps=1e-6):
    return F.rms_norm(x, x.shape[-1:], weight, float(eps))


def silu_mul(gate, up):
    """No fused op in torch's eager API: the composition F.silu(gate) * up (SwiGLU)."""
    return F.silu(gate) * up


def topk(x, k):
    """torch.topk's indices (k: kcontract passes a 0-d int64 tensor)."""
    return torch.topk(x, int(k), dim=-1).indices


def cross_entropy(logits, target, ignore_index=-100):
    return F.cross_entropy(logits, target, ignore_index=int(ignore_index))


def conv2d(x, w, stride, padding):
    return F.conv2d(x, w, stride=int(stride), padding=int(padding))
