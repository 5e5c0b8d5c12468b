"""DAZ or FTZ, process-wide or per computation: subnormals in and out of XLA on the CPU."""
import threading
import numpy as np
import jax, jax.numpy as jnp


def flush_to_zero_active():
    """True if this thread flushes subnormals right now (a subnormal times 1 gives 0)."""
    tiny = np.array([1e-39], dtype=np.float32)
    return bool((tiny * np.float32(1.0))[0] == 0.0)


sub = np.float32(1e-39)          # a float32 subnormal
big = np.float32(2.0**24)
tiny_scale = np.float32(2.0**-24)
normal = np.float32(1e-32)        # normal; times 2^-24 = 6e-40, a subnormal
print("numpy: sub*2^24 =", sub * big, " normal*2^-24 =", normal * tiny_scale)
print("jax:   sub*2^24 =", jnp.float32(sub) * big, " normal*2^-24 =", jnp.float32(normal) * tiny_scale)
print("jax jit:", jax.jit(lambda a, b: a * b)(jnp.float32(sub), big),
      jax.jit(lambda a, b: a * b)(jnp.float32(normal), tiny_scale))
print("jax device_put/get keeps the subnormal bits:", np.asarray(jnp.asarray(sub)).view(np.uint32) == sub.view(np.uint32))
print("main thread FTZ after jax ran:", flush_to_zero_active())
seen = []
def probe(x):
    seen.append((threading.current_thread().name, flush_to_zero_active()))
    return x
y = jax.jit(lambda v: jax.pure_callback(probe, jax.ShapeDtypeStruct((), jnp.float32), v * 2))(jnp.float32(1.0))
y.block_until_ready()
print("inside the XLA computation (host callback): thread, FTZ =", seen)
for dt in (jnp.float64, jnp.float16, jnp.bfloat16):
    s = jnp.finfo(dt).smallest_subnormal
    print(dt.__name__, "smallest subnormal * 1 =", jnp.asarray(s, dt) * jnp.asarray(1, dt),
          "| * 2^10 =", jnp.asarray(s, dt) * jnp.asarray(1024, dt), "numpy:", np.asarray(s, dtype=dt)*np.asarray(1024, dtype=dt))
