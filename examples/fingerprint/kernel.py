"""Two fp8 GEMMs with a narrow accumulator, emulated bit for bit in numpy: what
``kcontract fingerprint`` recovers from them is in this folder's README."""
from kcontract.fingerprint.designs import PUBLISHED


def fp8_gemm(a, b):
    """fp8 e4m3 operands, a 14-bit truncating accumulator for the whole reduction."""
    return PUBLISHED["hopper-fp8"].matmul(a, b)


def fp8_gemm_promoted(a, b):
    """The same, with partial sums promoted to an fp32 accumulator every 128 products."""
    return PUBLISHED["hopper-fp8-promoted"].matmul(a, b)
