"""Independent evidence, without kcontract: which operand format does torch.matmul on
the CPU really use under each float32 matmul precision?  Compares the float32 product
with the exact (float64) product of the operands as given, and of the operands rounded
to bfloat16 first.  Prints the distances and which emulation the result matches.

    python evidence.py
"""
import numpy as np
import torch

rng = np.random.default_rng(0)
a = torch.from_numpy(rng.standard_normal((64, 512)).astype(np.float32))
b = torch.from_numpy(rng.standard_normal((512, 64)).astype(np.float32))
exact = a.double() @ b.double()
bf16_operands = a.bfloat16().double() @ b.bfloat16().double()
print(f"torch {torch.__version__}, mkldnn bf16 available: "
      f"{torch.backends.mkldnn.is_available()}, cpu: {torch.backends.cpu.get_cpu_capability()}")
for level in ("highest", "high", "medium"):
    torch.set_float32_matmul_precision(level)
    out = (a @ b).double()
    torch.set_float32_matmul_precision("highest")
    d_exact = (out - exact).abs().max().item()
    d_bf16 = (out - bf16_operands).abs().max().item()
    verdict = "operands rounded to bfloat16" if d_bf16 < d_exact / 10 else "float32 operands"
    print(f"{level:8s} max|out - exact| = {d_exact:.3g}   max|out - bf16-operand product| = "
          f"{d_bf16:.3g}   -> {verdict}")

# why: what 'medium' sets, and whether oneDNN can honour it on this CPU
torch.set_float32_matmul_precision("medium")
print("after set_float32_matmul_precision('medium'): torch.backends.mkldnn.matmul.fp32_precision =",
      torch.backends.mkldnn.matmul.fp32_precision)
torch.set_float32_matmul_precision("highest")
supported = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
print("oneDNN bf16 supported on this CPU:", supported() if supported else "unknown")
torch.backends.mkldnn.matmul.fp32_precision = "bf16"
out = (a @ b).double()
torch.backends.mkldnn.matmul.fp32_precision = "ieee"
print(f"mkldnn fp32_precision='bf16' set directly: max|out - exact| = "
      f"{(out - exact).abs().max().item():.3g}, max|out - bf16-operand product| = "
      f"{(out - bf16_operands).abs().max().item():.3g}")

# which products 'medium' sends to bfloat16: the same comparison per shape (M x K x N)
print("under 'medium', by shape:")
for M, K, N in ((32, 16, 32), (16, 512, 16), (64, 128, 64), (256, 64, 256)):
    a = torch.from_numpy(rng.standard_normal((M, K)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((K, N)).astype(np.float32))
    torch.set_float32_matmul_precision("medium")
    out = (a @ b).double()
    torch.set_float32_matmul_precision("highest")
    d_exact = (out - a.double() @ b.double()).abs().max().item()
    d_bf16 = (out - a.bfloat16().double() @ b.bfloat16().double()).abs().max().item()
    verdict = "operands rounded to bfloat16" if d_bf16 < d_exact / 10 else "float32 operands"
    print(f"  {M:4d} x {K:4d} x {N:4d}: {verdict}")
