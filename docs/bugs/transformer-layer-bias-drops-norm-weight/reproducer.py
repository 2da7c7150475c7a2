"""PyTorch counterpart of reproducer.R (beside this file): TransformerEncoderLayer(bias=False) keeps its norms' weights.

Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

got = [n for n, _ in torch.nn.TransformerEncoderLayer(4, 2, 8, bias=False).named_parameters()]
print(f"PyTorch: {', '.join(got)}")
sys.exit(0 if {"norm1.weight", "norm2.weight"} <= set(got) else 1)
