"""PyTorch counterpart of reproducer.R (beside this file): Bilinear(4, 9, 2)'s init bound is 1/sqrt(4).

Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

torch.manual_seed(1)
top = torch.nn.Bilinear(4, 9, 2).weight.abs().max().item()
print(f"PyTorch: largest |weight| {top:.4f} (bound 0.5 = 1/sqrt(4))")
sys.exit(0 if 1 / 3 < top <= 0.5 else 1)
