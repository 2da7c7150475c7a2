"""PyTorch counterpart of reproducer.R (beside this file): cross entropy with class-probability targets.

Logits (1, 2, 3), target (0.2, 0.3, 0.5) -> 1.1076. Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

got = torch.nn.functional.cross_entropy(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[0.2, 0.3, 0.5]])).item()
print(f"PyTorch: {got:.4f}")
sys.exit(0 if abs(got - 1.1076) < 1e-3 else 1)
