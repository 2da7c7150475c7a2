"""PyTorch counterpart of reproducer.R (beside this file): ASGD averages the parameter into ax once step > t0 + 1.

x = (10, 20), lr 0.1, t0 = 1, gradient = x each step; prints x, mu and ax after each of 5 steps; ax after step 5
is the mean of x after steps 3, 4, 5. Exits 1 only if PyTorch itself changed.
"""
import sys

import torch

x = torch.tensor([10.0, 20.0], requires_grad=True)
opt = torch.optim.ASGD([x], lr=0.1, t0=1)
hist = []
for s in range(1, 6):
    x.grad = x.detach().clone()
    opt.step()
    hist.append(x.detach().clone())
    st = opt.state[x]
    xs, ax = tuple(round(v, 5) for v in x.tolist()), tuple(round(v, 5) for v in st["ax"].tolist())
    print(f"PyTorch step {s}: x {xs} mu {st['mu'].item():g} ax {ax}")
sys.exit(0 if torch.allclose(opt.state[x]["ax"], torch.stack(hist[2:]).mean(0)) else 1)
