"""PyTorch counterpart of reproducer.R (beside this file): a NaN gradient gives a NaN norm and NaN gradients, no error."""
import math
import sys

import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
x.grad = torch.tensor([float("nan"), 1.0])
n = torch.nn.utils.clip_grad_norm_([x], max_norm=1)
print(f"PyTorch: total norm {n.item()}, grad {tuple(x.grad.tolist())}")
sys.exit(0 if math.isnan(n.item()) and bool(x.grad.isnan().all()) else 1)
