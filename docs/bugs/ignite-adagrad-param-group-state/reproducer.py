"""PyTorch counterpart of reproducer.R (beside this file): Adagrad with two param groups steps; w becomes (0.9, 1.9) and b
2.95 (each moves by its group's lr at the first step). Exits 1 only if PyTorch itself changed."""
import sys

import torch

w = torch.tensor([1.0, 2.0], requires_grad=True)
b = torch.tensor([3.0], requires_grad=True)
opt = torch.optim.Adagrad([{"params": [w]}, {"params": [b], "lr": 0.05}], lr=0.1)
w.grad = torch.ones(2)
b.grad = torch.ones(1)
opt.step()
print(f"PyTorch: w {tuple(w.tolist())}, b {tuple(b.tolist())}")
sys.exit(0 if torch.allclose(w, torch.tensor([0.9, 1.9])) and torch.allclose(b, torch.tensor([2.95])) else 1)
