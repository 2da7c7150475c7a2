"""PyTorch counterpart of reproducer.R (beside this file): kl_div(reduction="batchmean") of a 0-d input is the sum.

Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

got = torch.nn.functional.kl_div(torch.tensor(-1.0), torch.tensor(0.5), reduction="batchmean").item()
print(f"PyTorch: {got:.4f}")
sys.exit(0 if abs(got - 0.1534264) < 1e-4 else 1)
