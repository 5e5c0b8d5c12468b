"""jnp.cumsum at float16: its error against the exact prefix sums (normwise: the largest
error over the largest prefix sum of the row), beside the same sums accumulated in
float32 and rounded once to float16, and the dtype of the scan in its jaxpr."""
import jax
import jax.numpy as jnp
import numpy as np


def normwise_errors(rows: int = 16, n: int = 4096) -> tuple[float, float]:
    """(jnp.cumsum's normwise error, a float32 running sum's rounded once) on float16
    N(0, 1) rows."""
    x = np.random.default_rng(0).standard_normal((rows, n)).astype(np.float16)
    exact = np.cumsum(x.astype(np.float64), axis=-1)
    scale = np.max(np.abs(exact), axis=-1, keepdims=True)

    def normwise(y):
        return float(np.max(np.abs(np.asarray(y, np.float64) - exact) / scale))
    out = np.asarray(jnp.cumsum(jnp.asarray(x), axis=-1))
    once = np.cumsum(x.astype(np.float32), axis=-1).astype(np.float16)
    return normwise(out), normwise(once)


if __name__ == "__main__":
    jax_err, once_err = normwise_errors()
    print(f"jnp.cumsum float16:                  normwise error {jax_err:.2e}")
    print(f"float32 running sum, rounded once:   normwise error {once_err:.2e}"
          f"  (float16 unit roundoff {2.0 ** -11:.2e})")
    print(jax.make_jaxpr(lambda v: jnp.cumsum(v))(jnp.ones(4, jnp.float16)))
