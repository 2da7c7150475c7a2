"""PyTorch counterpart of reproducer.R (beside this file): RNN on an unbatched (5, 2) input gives a (5, 3) output.

Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

shape = tuple(torch.nn.RNN(2, 3)(torch.randn(5, 2))[0].shape)
print(f"PyTorch: output shape {shape}")
sys.exit(0 if shape == (5, 3) else 1)
