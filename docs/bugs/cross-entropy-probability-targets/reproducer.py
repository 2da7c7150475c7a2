"""PyTorch counterpart of reproducer.R (beside this file): cross_entropy takes class-probability targets.

Soft targets give -sum(p * log_softmax(input)) averaged over the batch (1.007606 here); one-hot float targets give the
loss of the class indices (0.407606 here). Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch
import torch.nn.functional as F

x = torch.tensor([[1.0, 2.0, 3.0], [1.0, 0.0, -1.0]])
soft = torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
one_hot = torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
got_soft, got_hot = F.cross_entropy(x, soft).item(), F.cross_entropy(x, one_hot).item()
print(f"PyTorch: soft targets {got_soft:.6f}; one-hot float targets {got_hot:.6f}")
expected_soft = -(soft * F.log_softmax(x, 1)).sum(1).mean().item()
sys.exit(0 if abs(got_soft - expected_soft) < 1e-6 and abs(got_hot - F.cross_entropy(x, torch.tensor([2, 0])).item()) < 1e-6 else 1)
