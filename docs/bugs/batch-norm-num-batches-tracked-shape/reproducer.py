"""PyTorch counterpart of reproducer.R (beside this file): BatchNorm's num_batches_tracked is a 0-d tensor.

Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

shape = tuple(torch.nn.BatchNorm1d(3).num_batches_tracked.shape)
print(f"PyTorch: num_batches_tracked shape {shape}")
sys.exit(0 if shape == () else 1)
