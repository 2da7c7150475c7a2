"""PyTorch counterpart of reproducer.R (beside this file) (exits 1 only if PyTorch itself changed)."""
import sys

import torch

x1 = torch.tensor([10.0, 20.0], requires_grad=True)
x2 = torch.tensor([10.0, 20.0], requires_grad=True)
opt = torch.optim.RMSprop([x1, x2], lr=0.1, alpha=0.9, weight_decay=0.1)
x1.grad, x2.grad = torch.zeros(2), torch.zeros(2)
opt.step()
for n, x in (("x1", x1), ("x2", x2)):
    sq = tuple(round(v, 6) for v in opt.state[x]["square_avg"].tolist())
    print(f"PyTorch: {n} {tuple(round(v, 5) for v in x.tolist())} square_avg {sq}")
sys.exit(0 if all(torch.allclose(opt.state[x]["square_avg"], torch.tensor([0.1, 0.4])) for x in (x1, x2)) else 1)
