"""PyTorch counterpart of reproducer.R (beside this file): OneCycleLR takes an Adam with two param groups and sets each
group's beta1 to max_momentum (0.95). Exits 1 only if PyTorch changed."""
import sys

import torch

w = torch.tensor([1.0, 2.0], requires_grad=True)
b = torch.tensor([3.0], requires_grad=True)
opt = torch.optim.Adam([{"params": [w]}, {"params": [b], "lr": 0.05}], lr=0.1)
torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10)
betas = [group["betas"][0] for group in opt.param_groups]
print(f"PyTorch: OneCycleLR over two param groups; beta1 of the groups {betas}")
sys.exit(0 if betas == [0.95, 0.95] else 1)
