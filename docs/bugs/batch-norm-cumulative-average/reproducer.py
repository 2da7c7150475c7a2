"""PyTorch counterpart of reproducer.R (beside this file): BatchNorm1d(momentum=None) keeps a cumulative average.

Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

bn = torch.nn.BatchNorm1d(3, momentum=None)
x = torch.randn(4, 3)
bn(x)
print(f"PyTorch: the forward runs; running mean {bn.running_mean.tolist()}")
sys.exit(0 if torch.allclose(bn.running_mean, x.mean(0)) else 1)
