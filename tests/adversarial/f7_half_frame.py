"""Writes the first bytes of a reply frame into the worker's socket (a header
announcing 4 KiB, then 10 bytes) and stalls: a checker that receives without a
deadline waits for the rest forever."""
import os
import struct
import sys
import time

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'kernel.timeout'
FAMILY = 7
TIMEOUT = 3

def kernel(a, b):
    os.write(int(sys.argv[1]), struct.pack("!i", 4096) + b"\x80\x05partial")
    time.sleep(3600)
