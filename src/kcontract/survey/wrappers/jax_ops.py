"""jax's own ops in kcontract's calling conventions, where the table needs a wrapper."""
import jax
import jax.numpy as jnp


def layernorm(x, weight, bias, eps=1e-5):
    """jax.nn.standardize with its default variance algorithm, then the affine part."""
    return jax.nn.standardize(x, axis=-1, epsilon=eps) * weight + bias


def attention(q, k, v, causal=False):
    """jax.nn.dot_product_attention takes (batch, length, heads, dim); kcontract's
    convention is (batch, heads, length, dim), causal mask aligned bottom-right."""
    mask = None
    if causal:
        S, T = q.shape[-2], k.shape[-2]
        mask = jnp.tril(jnp.ones((S, T), dtype=bool), k=T - S)
    out = jax.nn.dot_product_attention(jnp.swapaxes(q, 1, 2), jnp.swapaxes(k, 1, 2),
                                       jnp.swapaxes(v, 1, 2), mask=mask)
    return jnp.swapaxes(out, 1, 2)


def linear_gelu(x, w, b):
    """No fused op in jax: the composition jax.nn.gelu(x @ w + b), erf form."""
    return jax.nn.gelu(jnp.matmul(x, w) + b, approximate=False)


def cast(x, dtype=None):
    return x.astype(getattr(jnp, str(dtype)))


def silu_mul(gate, up):
    """No fused op in jax: the composition jax.nn.silu(gate) * up (SwiGLU)."""
    return jax.nn.silu(gate) * up


def topk(x, k):
    """jax.lax.top_k's indices (k: kcontract passes a 0-d int64 array), as int64: top_k
    returns int32 indices, kcontract's convention is int64 (a calling convention, not a
    numerical difference)."""
    return jax.lax.top_k(x, int(k))[1].astype(jnp.int64)


def conv2d(x, w, stride, padding):
    s, p = int(stride), int(padding)
    return jax.lax.conv_general_dilated(x, w, window_strides=(s, s),
                                        padding=[(p, p), (p, p)],
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"))
