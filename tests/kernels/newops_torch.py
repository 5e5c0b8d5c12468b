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
