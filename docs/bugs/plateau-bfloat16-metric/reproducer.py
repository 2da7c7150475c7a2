"""PyTorch counterpart of reproducer.R (beside this file): ReduceLROnPlateau steps on a bfloat16 loss (its value as a
double, float(metrics)); the second step is no better, so with patience 0 the lr halves to 0.05. Exits 1 only if
PyTorch changed."""
import sys

import torch

weight = torch.tensor([1.0, 2.0], dtype=torch.bfloat16, requires_grad=True)
opt = torch.optim.SGD([weight], lr=0.1)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)
loss = (weight * weight).mean()  # a bfloat16 loss, as bfloat16 weights give
scheduler.step(loss.detach())
scheduler.step(loss.detach())
print(f"PyTorch: the scheduler stepped on a bfloat16 loss; lr {opt.param_groups[0]['lr']}")
sys.exit(0 if opt.param_groups[0]["lr"] == 0.05 else 1)
