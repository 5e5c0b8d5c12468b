"""jnp.take and indexing on out-of-range indices (V = 5 rows holding 1..5)."""
import numpy as np, jax, jax.numpy as jnp
t = jnp.arange(1.0, 6.0).reshape(5, 1)   # V = 5 rows holding 1..5
idx = jnp.array([-1, -5, -6, 4, 5, 7])
print("indices           ", idx.tolist())
print("jnp.take (default)", jnp.take(t, idx, axis=0)[:, 0].tolist())
print("t[idx] (indexing) ", t[idx][:, 0].tolist())
print("jnp.take clip     ", jnp.take(t, idx, axis=0, mode="clip")[:, 0].tolist())
