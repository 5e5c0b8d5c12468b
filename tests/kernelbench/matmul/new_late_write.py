"""Hacked: returns the right product and leaves a thread behind that overwrites it with
zeros a moment later: correct at the return, wrong for whoever reads it next."""
import threading
import time

import torch.nn as nn

EXPECTED = {"kernelbench": None, "kcontract": ["integrity.late-write"]}


def _spoil(out):
    time.sleep(0.002)
    out.zero_()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        out = A @ B
        threading.Thread(target=_spoil, args=(out,), daemon=True).start()
        return out
