"""jax's own ops and their variants, in kcontract's calling conventions: the survey's
findings checked one by one (see README.md)."""
import jax
import jax.numpy as jnp


def layernorm_fast(x, weight, bias, eps=1e-5):
    """jax.nn.standardize as it is by default: algorithm="fast", var = E[x^2] - E[x]^2."""
    return jax.nn.standardize(x, axis=-1, epsilon=eps) * weight + bias


def layernorm_stable(x, weight, bias, eps=1e-5):
    """The two-pass variance: algorithm="stable", var = E[(x - E[x])^2]."""
    return jax.nn.standardize(x, axis=-1, epsilon=eps, algorithm="stable") * weight + bias


def embedding_take(table, indices):
    """jnp.take's default mode ("fill"): NaN rows for indices outside [-V, V)."""
    return jnp.take(table, indices, axis=0)


def embedding_clip(table, indices):
    """jnp.take(mode="clip"): every index clamped into [0, V)."""
    return jnp.take(table, indices, axis=0, mode="clip")


def sum_last(x):
    return jnp.sum(x, axis=-1)


def gelu_erf(x):
    return jax.nn.gelu(x, approximate=False)
