"""PyTorch counterpart of reproducer.R (beside this file): a bfloat16 norm gives a bfloat16 clip coefficient."""
import sys

import torch

x = torch.zeros(2, dtype=torch.bfloat16, requires_grad=True)
x.grad = torch.tensor([1.7, 0.0], dtype=torch.bfloat16)
total_norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(x.grad, 2)]), 2)
coef = 0.1 / (total_norm + 1e-6)
torch.nn.utils.clip_grad_norm_([x], max_norm=0.1)
clipped = float(x.grad[0])
print(f"PyTorch: coefficient {str(coef.dtype).removeprefix('torch.')} {coef.item()}, clipped grad {clipped}")
sys.exit(0 if coef.dtype == torch.bfloat16 and clipped == 0.099609375 else 1)
