"""Touches memory in 32 MiB steps, under the address-space limit, until the machine is
full: only the worker's memory cgroup (here lowered to 256 MiB to keep the test small)
stops it; the kernel's OOM killer ends the worker inside its cgroup and the verdict
names the limit.  Bounded at 4 GiB in case no cgroup is enforced (then skipped)."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "kernel.memory-limit"
FAMILY = 7
REQUIRES_SANDBOX = True
REQUIRES_LIMITS = ["memory"]
LIMITS = {"KCONTRACT_WORKER_MEMORY": "256M"}

_HOLD = []


def kernel(a, b):
    for _ in range(128):
        _HOLD.append(np.ones(8 << 20, dtype=np.float32))
    return np.matmul(a, b)
