"""torch.matmul on the CPU under each float32 matmul precision setting, in kcontract's
calling convention.  Each kernel sets the precision for its own call and restores it, so
the checker's process-state watch (which flags a kernel that leaves a switch flipped)
does not fire: the setting is part of what is checked, not tampering."""
import torch


def _with_precision(level, a, b):
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(level)
    try:
        return torch.matmul(a, b)
    finally:
        torch.set_float32_matmul_precision(old)


def matmul_highest(a, b):
    return _with_precision("highest", a, b)


def matmul_high(a, b):
    return _with_precision("high", a, b)


def matmul_medium(a, b):
    return _with_precision("medium", a, b)


def matmul_bf16_operands(a, b):
    """What 'medium' does where the CPU has bfloat16 matmul units: the operands rounded to
    bfloat16, the products accumulated in float32 (an emulation, for comparison)."""
    return torch.matmul(a.bfloat16().float(), b.bfloat16().float())
