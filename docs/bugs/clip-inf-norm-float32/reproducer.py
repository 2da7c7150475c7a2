"""PyTorch counterpart of reproducer.R (beside this file): the infinity norm keeps the gradients' dtype."""
import sys

import torch

x = torch.zeros(2, dtype=torch.bfloat16, requires_grad=True)
x.grad = torch.tensor([1.7, 0.3], dtype=torch.bfloat16)
norm = torch.nn.utils.clip_grad_norm_([x], max_norm=0.1, norm_type=float("inf"))
clipped = float(x.grad[0])
y = torch.zeros(1, dtype=torch.float64, requires_grad=True)
y.grad = torch.tensor([0.1], dtype=torch.float64)
norm64 = torch.nn.utils.clip_grad_norm_([y], max_norm=1.0, norm_type=float("inf"))
print(f"PyTorch: norm {str(norm.dtype).removeprefix('torch.')}, clipped grad {clipped}; "
      f"float64 norm {str(norm64.dtype).removeprefix('torch.')} {norm64.item()!r}")
sys.exit(0 if norm.dtype == torch.bfloat16 and clipped == 0.099609375 and norm64.item() == 0.1 else 1)
