"""Announces a 1 GiB reply in a frame header and sends nothing more."""
import os
import struct
import sys
import time

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'integrity.transport'
FAMILY = 7
TIMEOUT = 10

def kernel(a, b):
    os.write(int(sys.argv[1]), struct.pack("!i", 1 << 30))
    time.sleep(3600)
