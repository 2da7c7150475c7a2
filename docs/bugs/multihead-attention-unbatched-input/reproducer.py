"""PyTorch counterpart of reproducer.R (beside this file): MultiheadAttention on an unbatched (3, 4) input.

Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

x = torch.randn(3, 4)
out, _ = torch.nn.MultiheadAttention(4, 2)(x, x, x)
print(f"PyTorch: an output of shape {tuple(out.shape)}")
sys.exit(0 if tuple(out.shape) == (3, 4) else 1)
