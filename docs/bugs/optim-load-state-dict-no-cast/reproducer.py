"""PyTorch counterpart of reproducer.R (beside this file): Adam's moments loaded as float64 into an optimizer of a
float32 parameter are float32 after load_state_dict() (prints float32)."""
import sys

import torch

p = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
opt = torch.optim.Adam([p], lr=0.1)
saved = opt.state_dict()
saved["state"] = {0: {"step": torch.tensor(1.0), "exp_avg": torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64),
                      "exp_avg_sq": torch.tensor([0.01, 0.02, 0.03], dtype=torch.float64)}}
opt.load_state_dict(saved)
loaded = opt.state[p]["exp_avg"].dtype
print(f"PyTorch: exp_avg after load_state_dict is {loaded} for a {p.dtype} parameter")
sys.exit(0 if loaded == p.dtype else 1)
