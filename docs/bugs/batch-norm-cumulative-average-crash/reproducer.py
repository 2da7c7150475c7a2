"""PyTorch counterpart of reproducer.R (beside this file) (exits 1 only if PyTorch itself changed)."""
import sys

import torch

bn = torch.nn.BatchNorm1d(1, momentum=None)
x = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
bn(x)
bn(x * 2)
got = float(bn.running_mean)
print(f"PyTorch: running_mean after two batches: {got:g}")
sys.exit(0 if abs(got - 3.75) < 1e-6 else 1)
