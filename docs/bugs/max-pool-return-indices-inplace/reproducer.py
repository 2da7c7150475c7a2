"""PyTorch counterpart of reproducer.R (beside this file): the backward through max_pool2d(return_indices=True) runs.

Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

x = torch.randn(1, 1, 4, 4, requires_grad=True)
out, _ = torch.nn.functional.max_pool2d(x, 2, return_indices=True)
out.sum().backward()
print(f"PyTorch: the backward runs ({int((x.grad != 0).sum())} gradients of 1)")
sys.exit(0 if int((x.grad != 0).sum()) == 4 else 1)
