"""PyTorch counterpart of reproducer.R (beside this file): SGD weight decay adds weight_decay * param.

x1 = x2 = (10, 20), lr 1, weight_decay 0.1, zero gradients, two steps -> (9, 18) then (8.1, 16.2) for both.
Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

x1 = torch.tensor([10.0, 20.0], requires_grad=True)
x2 = torch.tensor([10.0, 20.0], requires_grad=True)
opt = torch.optim.SGD([x1, x2], lr=1, weight_decay=0.1)
for s in (1, 2):
    x1.grad, x2.grad = torch.zeros(2), torch.zeros(2)
    opt.step()
    print(f"PyTorch step {s}: x1 {tuple(x1.tolist())}  x2 {tuple(x2.tolist())}")
sys.exit(0 if torch.allclose(x1, torch.tensor([8.1, 16.2])) and torch.allclose(x2, torch.tensor([8.1, 16.2])) else 1)
