"""PyTorch counterpart of reproducer.R (beside this file): Adam with weight_decay leaves .grad unchanged (prints (1, 1))."""
import sys

import torch

x = torch.tensor([10.0, 20.0], requires_grad=True)
opt = torch.optim.Adam([x], lr=0.1, weight_decay=0.1)
x.grad = torch.ones(2)
opt.step()
print(f"PyTorch: grad after step {tuple(x.grad.tolist())}")
sys.exit(0 if torch.equal(x.grad, torch.ones(2)) else 1)
