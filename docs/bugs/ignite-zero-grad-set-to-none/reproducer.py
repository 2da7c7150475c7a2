"""PyTorch counterpart of reproducer.R (beside this file): Adam's zero_grad(set_to_none=False) zeroes the grad and keeps
it, (0, 0). Exits 1 only if PyTorch changed."""
import sys

import torch

w = torch.tensor([1.0, 2.0], requires_grad=True)
opt = torch.optim.Adam([w], lr=0.1)
w.grad = torch.tensor([4.0, 8.0])
opt.zero_grad(set_to_none=False)
print(f"PyTorch: zero_grad(set_to_none=False) leaves the grad {None if w.grad is None else tuple(w.grad.tolist())}")
sys.exit(0 if w.grad is not None and w.grad.tolist() == [0.0, 0.0] else 1)
