"""PyTorch counterpart of reproducer.R (beside this file): a CPU backward follows torch.set_num_threads.

The gradient of (x * w).sum() with respect to w is x.sum(); after set_num_threads(2) every one of 60 backward passes gives
the forward sum at 2 threads, bit for bit. Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

x = torch.sin(torch.arange(0, 2**20, dtype=torch.float32))
w = torch.ones(1, requires_grad=True)


def gradient() -> str:
    w.grad = None
    (x * w).sum().backward()
    return float(w.grad.item()).hex()


torch.set_num_threads(1)
one_thread = x.sum().item().hex()
gradient()
torch.set_num_threads(2)
two_threads = x.sum().item().hex()
got = [gradient() for _ in range(60)]
print(f"forward sum: 1 thread {one_thread}, 2 threads {two_threads}")
print(f"PyTorch, 60 backward passes after set_num_threads(2): {got.count(two_threads)} gave the 2-thread sum, "
      f"{got.count(one_thread)} the 1-thread sum")
sys.exit(0 if one_thread != two_threads and got == [two_threads] * 60 else 1)
