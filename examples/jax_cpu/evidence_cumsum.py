"""jnp.cumsum at float16: its error against the exact prefix sums (normwise: the largest
error over the largest prefix sum of the row), beside the same sums accumulated in
float32 and rounded once to float16, and the dtype of the scan in its jaxpr."""
import jax
import jax.numpy as jnp
import numpy as np

x = np.random.default_rng(0).standard_normal((16, 4096)).astype(np.float16)
exact = np.cumsum(x.astype(np.float64), axis=-1)
scale = np.max(np.abs(exact), axis=-1, keepdims=True)


def normwise(y):
    return float(np.max(np.abs(np.asarray(y, np.float64) - exact) / scale))


out = np.asarray(jnp.cumsum(jnp.asarray(x), axis=-1))
once = np.cumsum(x.astype(np.float32), axis=-1).astype(np.float16)
print(f"jnp.cumsum float16:                  normwise error {normwise(out):.2e}")
print(f"float32 running sum, rounded once:   normwise error {normwise(once):.2e}"
      f"  (float16 unit roundoff {2.0 ** -11:.2e})")
print(jax.make_jaxpr(lambda v: jnp.cumsum(v))(jnp.ones(4, jnp.float16)))
