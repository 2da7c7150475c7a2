"""PyTorch counterpart of reproducer.R (beside this file): a number on either side keeps a bfloat16 tensor bfloat16.

Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

x = torch.ones(2, dtype=torch.bfloat16)
got = {"1 - x": (1 - x).dtype, "2 * x": (2 * x).dtype, "x - 1": (x - 1).dtype}
print("PyTorch: " + ", ".join(f"{k} -> {v}" for k, v in got.items()))
sys.exit(0 if all(v == torch.bfloat16 for v in got.values()) else 1)
