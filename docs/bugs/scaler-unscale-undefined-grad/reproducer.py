"""PyTorch counterpart of reproducer.R (beside this file): GradScaler steps an optimizer holding a parameter without a
gradient (a frozen one), skipping it; trained becomes (0.9, 1.8), frozen stays (3, 4). Exits 1 only if PyTorch changed."""
import sys

import torch

trained = torch.tensor([1.0, 2.0], requires_grad=True)
frozen = torch.tensor([3.0, 4.0], requires_grad=False)
opt = torch.optim.SGD([trained, frozen], lr=0.1)
scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
scaler.scale(torch.zeros(()))  # initialises the scale, as a first scale() call does
trained.grad = torch.tensor([4.0, 8.0])  # the gradient of a loss scaled by 4
scaler.step(opt)
scaler.update()
print(f"PyTorch: trained {tuple(trained.tolist())}, frozen {tuple(frozen.tolist())}")
sys.exit(0 if torch.allclose(trained, torch.tensor([0.9, 1.8])) and frozen.tolist() == [3.0, 4.0] else 1)
