"""PyTorch counterpart of reproducer.R (beside this file): MultiheadAttention(add_zero_attn=True) runs.

A 3x2x4 input gives a 3x2x4 output. Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

torch.manual_seed(0)
attention = torch.nn.MultiheadAttention(embed_dim=4, num_heads=2, add_zero_attn=True)
x = torch.randn(3, 2, 4)
out, _ = attention(x, x, x)
print(f"PyTorch MultiheadAttention(add_zero_attn=True) of a 3x2x4 input: {'x'.join(map(str, out.shape))}")
sys.exit(0 if out.shape == (3, 2, 4) else 1)
