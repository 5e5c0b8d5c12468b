"""A fork bomb: every process forks for ever.  As root, RLIMIT_NPROC does not bind; the
worker's cgroup (pids.max, here lowered to 64 so that the test stays small) does, and
the call's verdict names the limit.  The children it leaves are killed with the cgroup."""
import os

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "kernel.process-limit"
FAMILY = 7
REQUIRES_SANDBOX = True
REQUIRES_LIMITS = ["processes"]
LIMITS = {"KCONTRACT_WORKER_PROCESSES": "64"}


def kernel(a, b):
    while True:
        os.fork()
