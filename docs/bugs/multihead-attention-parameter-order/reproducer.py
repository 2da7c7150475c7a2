"""PyTorch counterpart of reproducer.R (beside this file): MultiheadAttention's parameter order.

Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

got = [n for n, _ in torch.nn.MultiheadAttention(4, 2).named_parameters()]
print(f"PyTorch: {', '.join(got)}")
sys.exit(0 if got == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"] else 1)
