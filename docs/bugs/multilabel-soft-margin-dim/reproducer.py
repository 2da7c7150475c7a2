"""PyTorch counterpart of reproducer.R (beside this file): multilabel_soft_margin_loss averages over the classes per sample.

A 2 x 3 input: reduction "none" gives 2 values (0.304756, 1.138075), "sum" their sum (1.442830). Exits 1 only if PyTorch
itself stopped doing so.
"""
import sys

import torch
import torch.nn.functional as F

x = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
y = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
none = F.multilabel_soft_margin_loss(x, y, reduction="none")
total = F.multilabel_soft_margin_loss(x, y, reduction="sum")
print(f"PyTorch: reduction 'none' has shape {tuple(none.shape)}: {[round(v, 6) for v in none.tolist()]}; 'sum' {total.item():.6f}")
expected = (-(y * F.logsigmoid(x) + (1 - y) * F.logsigmoid(-x))).sum(1) / 3
sys.exit(0 if none.shape == (2,) and torch.allclose(none, expected) else 1)
