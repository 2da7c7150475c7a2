"""PyTorch counterpart of reproducer.R (beside this file): Embedding's padding row is zero at start and gets no gradient.

padding_idx 0, 1, -1 (R's 1, 2, -1): rows 0, 1 and 3 of 0..3, each both zeroed and without gradient. Exits 1 only if
PyTorch itself stopped doing so.
"""
import sys

import torch

torch.manual_seed(0)
same = True
for p in (0, 1, -1):
    e = torch.nn.Embedding(4, 2, padding_idx=p)
    e(torch.arange(4)).sum().backward()
    zero = (e.weight.abs().sum(1) == 0).nonzero().flatten().tolist()
    assert e.weight.grad is not None
    no_grad = (e.weight.grad.abs().sum(1) == 0).nonzero().flatten().tolist()
    print(f"PyTorch Embedding(4, 2, padding_idx={p}): row zeroed at start {zero}, row without gradient {no_grad}")
    same = same and zero == no_grad
sys.exit(0 if same else 1)
