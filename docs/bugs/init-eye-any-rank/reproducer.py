"""PyTorch counterpart of reproducer.R (beside this file): eye_ refuses a tensor that is not 2-D, and leaves it as it was.

Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

w = torch.empty(4, 3, 3, 3)
try:
    torch.nn.init.eye_(w)
    said = "ran"
except ValueError as err:
    said = f"ValueError: {err}"
print(f"PyTorch eye_(4x3x3x3 weight): {said}; the weight's shape is {'x'.join(map(str, w.shape))}")
sys.exit(0 if said.startswith("ValueError") and w.shape == (4, 3, 3, 3) else 1)
