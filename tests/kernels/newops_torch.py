"""Correct torch kernels for the LLM-era ops (imported by correct_torch.py)."""
import torch


def _work(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def rmsnorm(x, weight, eps=1e-6):
    w = _work(x)
    return torch.nn.functional.rms_norm(x.to(w), (x.shape[-1],), weight.to(w), eps).to(x.dtype)


def silu_mul(gate, up):
    w = _work(gate)
    return (torch.nn.functional.silu(gate.to(w)) * up.to(w)).to(gate.dtype)


def cumsum(x):
    return torch.cumsum(x.to(_work(x)), dim=-1).to(x.dtype)


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope(x, cos, sin):
    # the Hugging Face formulation: x * cos + rotate_half(x) * sin, tables repeated twice
    w = _work(x)
    c, s = torch.cat((cos, cos), dim=-1).to(w), torch.cat((sin, sin), dim=-1).to(w)
    return (x.to(w) * c + _rotate_half(x.to(w)) * s).to(x.dtype)


def topk(x, k):
    # a stable descending sort: ties to the lower index, NaN first (torch.topk itself
    # does not promise an order among ties)
    return torch.sort(x, dim=-1, descending=True, stable=True).indices[..., :int(k)]


def cross_entropy(logits, target, ignore_index=-100):
    w = _work(logits)
    return torch.nn.functional.cross_entropy(logits.to(w), target,
                                             ignore_index=ignore_index).to(logits.dtype)
