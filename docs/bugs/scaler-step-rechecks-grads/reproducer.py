"""PyTorch counterpart of reproducer.R (beside this file): unscale_, clip by value, step: GradScaler skips the step from
what unscale_ found (an inf), so w stays (1, 2) and the scale backs off from 4 to 2. Exits 1 only if PyTorch changed."""
import sys

import torch

w = torch.tensor([1.0, 2.0], requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
scaler.scale(torch.zeros(()))  # initialises the scale, as a first scale() call does
w.grad = torch.tensor([float("inf"), 8.0])  # an overflow in the scaled gradient
scaler.unscale_(opt)
torch.nn.utils.clip_grad_value_([w], clip_value=1.0)
scaler.step(opt)
scaler.update()
print(f"PyTorch: w {tuple(w.tolist())}, scale {scaler.get_scale()}")
sys.exit(0 if w.tolist() == [1.0, 2.0] and scaler.get_scale() == 2.0 else 1)
