"""Real library kernels in kcontract's calling conventions: numpy and ml_dtypes, torch (CPU,
with its precision settings, autocast and flush-to-zero) and JAX on the CPU (numpy in, numpy
out).  The diagnosis corpus (``corpus.py``) says, for each, what the cause of its failures is
and how that was established without kcontract."""
import numpy as np


# -- numpy / ml_dtypes -----------------------------------------------------------------------

def np_matmul(a, b):
    return np.matmul(a, b)


def np_matmul_fp16_operands(a, b):
    """fp32 in and out; operands rounded to fp16, the products accumulated in fp32 (the
    ``allow_fp32_to_fp16`` path of matrix units)."""
    with np.errstate(over="ignore", invalid="ignore"):
        a16, b16 = a.astype(np.float16), b.astype(np.float16)
    return np.matmul(a16.astype(np.float32), b16.astype(np.float32))


def np_sum(x):
    return np.sum(x, axis=-1)


def np_softmax_naive(x):
    """exp without subtracting the row maximum."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        return e / np.sum(e, axis=-1, keepdims=True)


def np_softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def np_layernorm_one_pass(x, weight, bias, eps=1e-5):
    """variance as E[x^2] - E[x]^2 (one pass over the data)."""
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.maximum(np.mean(x * x, axis=-1, keepdims=True) - mean * mean, 0)
    return ((x - mean) / np.sqrt(var + eps) * weight + bias).astype(x.dtype)


def np_layernorm(x, weight, bias, eps=1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + eps) * weight + bias).astype(x.dtype)


def np_embedding_index(table, indices):
    """numpy fancy indexing: a negative index counts from the end, past the end raises."""
    return table[indices]


def np_embedding_take_clip(table, indices):
    return np.take(table, indices, axis=0, mode="clip")


def np_embedding_take_wrap(table, indices):
    return np.take(table, indices, axis=0, mode="wrap")


def np_gelu_tanh(x):
    """the tanh approximation of GELU (what many libraries ship as 'fast gelu')."""
    x64 = x.astype(np.float64)
    y = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
    return y.astype(x.dtype)


def np_cast(x, dtype=None):
    import ml_dtypes  # noqa: F401  (the bfloat16 and fp8 dtypes)
    return x.astype(np.dtype(str(dtype)))


def np_cast_bf16_truncate(x, dtype=None):
    """float32 -> bfloat16 by dropping the low 16 bits (round toward zero)."""
    import ml_dtypes
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32).astype(ml_dtypes.bfloat16)


def np_sum_bf16_sequential(x):
    """bfloat16 sum with a bfloat16 accumulator (ml_dtypes' add, one element at a time)."""
    acc = np.zeros(x.shape[:-1], dtype=x.dtype)
    for j in range(x.shape[-1]):
        acc = acc + x[..., j]
    return acc


def np_gelu_vectorized(x):
    """erf-GELU through math.erf element by element: the result comes back as float64."""
    import math
    return np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))(x.astype(np.float64))


# -- torch (CPU) -----------------------------------------------------------------------------

def _torch():
    import torch
    return torch


def torch_matmul_medium(a, b):
    """torch.matmul under set_float32_matmul_precision('medium'): on a CPU without bf16
    matrix units this changes nothing."""
    torch = _torch()
    torch.set_float32_matmul_precision("medium")
    try:
        return torch.matmul(a, b)
    finally:
        torch.set_float32_matmul_precision("highest")


def torch_matmul_autocast_bf16(a, b):
    """torch.matmul under CPU autocast to bfloat16, the result handed back as float32."""
    torch = _torch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = torch.matmul(a, b)
    return out.to(a.dtype)


def torch_linear_gelu_autocast_bf16(x, w, b):
    torch = _torch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = torch.nn.functional.gelu(torch.addmm(b, x, w) if x.dim() == 2 else x @ w + b)
    return out.to(x.dtype)


def _ftz(fn):
    def wrapped(*args, **kwargs):
        torch = _torch()
        torch.set_flush_denormal(True)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_flush_denormal(False)
    wrapped.__doc__ = f"{fn.__name__} under torch.set_flush_denormal(True)"
    return wrapped


def _t_gelu(x):
    return _torch().nn.functional.gelu(x)


def _t_matmul(a, b):
    return _torch().matmul(a, b)


def _t_sum(x):
    return _torch().sum(x, dim=-1)


def _t_softmax(x):
    return _torch().softmax(x, dim=-1)


def _t_layernorm(x, weight, bias, eps=1e-5):
    return _torch().nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps)


def _t_attention(q, k, v, causal=False):
    torch = _torch()
    mask = None
    if causal:
        S, T = q.shape[-2], k.shape[-2]
        mask = torch.ones(S, T, dtype=torch.bool).tril(diagonal=T - S)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _t_linear_gelu(x, w, b):
    torch = _torch()
    return torch.nn.functional.gelu(torch.addmm(b, x, w))


torch_gelu_ftz = _ftz(_t_gelu)
torch_layernorm_ftz = _ftz(_t_layernorm)
torch_attention_ftz = _ftz(_t_attention)
torch_linear_gelu_ftz = _ftz(_t_linear_gelu)
torch_attention = _t_attention
torch_linear_gelu = _t_linear_gelu
torch_matmul_ftz = _ftz(_t_matmul)
torch_sum_ftz = _ftz(_t_sum)
torch_softmax_ftz = _ftz(_t_softmax)
torch_gelu = _t_gelu
torch_matmul = _t_matmul
torch_softmax = _t_softmax
torch_layernorm = _t_layernorm


def torch_gelu_tanh(x):
    return _torch().nn.functional.gelu(x, approximate="tanh")


def torch_sum_cumsum(x):
    """a sum read off the end of a running (cumulative) sum."""
    return _torch().cumsum(x, dim=-1)[..., -1]


# -- JAX (CPU), numpy in, numpy out ------------------------------------------------------------

def _jnp():
    import jax
    jax.config.update("jax_platforms", "cpu")
    import jax.numpy as jnp
    return jax, jnp


def jax_gelu(x):
    """jax.nn.gelu with its default, approximate=True (the tanh form)."""
    jax, jnp = _jnp()
    return np.asarray(jax.nn.gelu(jnp.asarray(x)))


def jax_gelu_erf(x):
    jax, jnp = _jnp()
    return np.asarray(jax.nn.gelu(jnp.asarray(x), approximate=False))


def jax_matmul(a, b):
    jax, jnp = _jnp()
    return np.asarray(jnp.matmul(jnp.asarray(a), jnp.asarray(b)))


def jax_softmax(x):
    jax, jnp = _jnp()
    return np.asarray(jax.nn.softmax(jnp.asarray(x), axis=-1))


def jax_sum(x):
    jax, jnp = _jnp()
    return np.asarray(jnp.sum(jnp.asarray(x), axis=-1))


def jax_embedding_take(table, indices):
    """jnp.take: negative indices count from the end, past the end filled with NaN."""
    jax, jnp = _jnp()
    return np.asarray(jnp.take(jnp.asarray(table), jnp.asarray(indices), axis=0))


def jax_embedding_index(table, indices):
    """table[indices] in JAX: out-of-range indices are clamped."""
    jax, jnp = _jnp()
    return np.asarray(jnp.asarray(table)[jnp.asarray(indices)])


def jax_attention(q, k, v, causal=False):
    jax, jnp = _jnp()
    return np.asarray(jax.nn.dot_product_attention(
        jnp.asarray(q).transpose(0, 2, 1, 3), jnp.asarray(k).transpose(0, 2, 1, 3),
        jnp.asarray(v).transpose(0, 2, 1, 3), is_causal=False,
        mask=_bottom_right(q.shape[2], k.shape[2]) if causal else None).transpose(0, 2, 1, 3))


def _bottom_right(S, T):
    return np.tril(np.ones((S, T), dtype=bool), k=T - S)[None, None]


# -- shape faults: the generated kernels of examples/reward_hacked ----------------------------

def _hacked():
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                        "reward_hacked", "kernel.py")
    spec = importlib.util.spec_from_file_location("reward_hacked_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def np_matmul_benchmark_shape_only(a, b):
    return _hacked().matmul_benchmark_shape_only(a, b)


_REUSE = []


def np_matmul_reuses_result(a, b):
    if not _REUSE:
        _REUSE.append(_hacked())
    return _REUSE[0].matmul_reuses_result(a, b)


def jax_layernorm_fast(x, weight, bias, eps=1e-5):
    """jax.nn.standardize with its default algorithm ("fast": var = E[x^2] - E[x]^2)."""
    jax, jnp = _jnp()
    return np.asarray(jax.nn.standardize(jnp.asarray(x), axis=-1, epsilon=eps)
                      * jnp.asarray(weight) + jnp.asarray(bias))


def jax_layernorm_stable(x, weight, bias, eps=1e-5):
    """jax.nn.standardize(algorithm="stable"): var = E[(x - E[x])^2]."""
    jax, jnp = _jnp()
    return np.asarray(jax.nn.standardize(jnp.asarray(x), axis=-1, epsilon=eps,
                                         algorithm="stable")
                      * jnp.asarray(weight) + jnp.asarray(bias))


def jax_linear_gelu(x, w, b):
    jax, jnp = _jnp()
    return np.asarray(jax.nn.gelu(jnp.matmul(jnp.asarray(x), jnp.asarray(w)) + jnp.asarray(b),
                                  approximate=False))


def np_attention(q, k, v, causal=False):
    """numpy float32 attention: max-subtracted softmax, two matmuls."""
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * np.float32(1.0 / np.sqrt(q.shape[-1]))
    if causal:
        S, T = q.shape[-2], k.shape[-2]
        s = np.where(_bottom_right(S, T)[0, 0], s, -np.inf)
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return np.matmul(e / np.sum(e, axis=-1, keepdims=True), v).astype(q.dtype)


def np_layernorm_bf16_arith(x, weight, bias, eps=1e-5):
    """layernorm in ml_dtypes' bfloat16 arithmetic: every operation rounded to bfloat16, the
    mean and the variance accumulated in bfloat16 one element at a time."""
    n = x.shape[-1]
    mean = np.zeros(x.shape[:-1] + (1,), dtype=x.dtype)
    for j in range(n):
        mean = mean + x[..., j:j + 1]
    mean = mean / x.dtype.type(n)
    d = x - mean
    var = np.zeros_like(mean)
    for j in range(n):
        var = var + d[..., j:j + 1] * d[..., j:j + 1]
    var = var / x.dtype.type(n)
    return d / np.sqrt(var + x.dtype.type(eps)) * weight + bias


def _via_fp32(fn):
    """``fn`` on the inputs widened to float32 (exact, through ml_dtypes for bfloat16), its
    result rounded back to the inputs' format (round-to-nearest-even, subnormals kept)."""
    def wrapped(*args, **kwargs):
        return fn(*(a.astype(np.float32) for a in args), **kwargs).astype(args[0].dtype)
    wrapped.__doc__ = f"{fn.__name__} in float32 between the inputs' format and back"
    return wrapped


np_via_fp32_layernorm = _via_fp32(np_layernorm)
np_via_fp32_attention = _via_fp32(np_attention)


def jax_cumsum(x):
    jax, jnp = _jnp()
    return np.asarray(jnp.cumsum(jnp.asarray(x), axis=-1))


def torch_silu_mul(gate, up):
    """SwiGLU as the eager composition: silu's result is rounded to the input format."""
    import torch
    return torch.nn.functional.silu(gate) * up


def torch_rmsnorm(x, weight, eps=1e-6):
    import torch
    return torch.nn.functional.rms_norm(x, x.shape[-1:], weight, float(eps))
