"""PyTorch counterpart of reproducer.R (beside this file): BatchNorm1d(momentum=None) keeps a cumulative moving average.

Two training batches with batch means (2, 20) and (6, 60): the running mean is (4, 40). Exits 1 only if PyTorch itself
stopped doing so.
"""
import sys

import torch

m = torch.nn.BatchNorm1d(2, momentum=None)
for x in (torch.tensor([[1.0, 10.0], [3.0, 30.0]]), torch.tensor([[5.0, 50.0], [7.0, 70.0]])):
    m(x)
print(f"PyTorch BatchNorm1d(momentum=None), two training batches: running_mean {m.running_mean.tolist()}")
sys.exit(0 if torch.allclose(m.running_mean, torch.tensor([4.0, 40.0])) else 1)
