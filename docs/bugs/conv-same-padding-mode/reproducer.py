"""PyTorch counterpart of reproducer.R (beside this file): Conv2d(padding="same", padding_mode="reflect") runs.

A 1x1x4x5 input gives a 1x1x4x5 output. Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

conv = torch.nn.Conv2d(1, 1, 3, padding="same", padding_mode="reflect")
out = conv(torch.arange(1.0, 21.0).view(1, 1, 4, 5))
print(f"PyTorch Conv2d(padding='same', padding_mode='reflect') of a 1x1x4x5 input: {'x'.join(map(str, out.shape))}")
sys.exit(0 if out.shape == (1, 1, 4, 5) else 1)
