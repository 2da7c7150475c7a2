"""PyTorch counterpart of reproducer.R (beside this file): Softmax2d normalises over the channels (dim -3).

Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

torch.manual_seed(0)
sums = torch.nn.Softmax2d()(torch.randn(2, 3, 2, 2)).sum(1)
print(f"PyTorch: sums over the channels range {sums.min().item():.4f} .. {sums.max().item():.4f}")
sys.exit(0 if torch.allclose(sums, torch.ones_like(sums)) else 1)
