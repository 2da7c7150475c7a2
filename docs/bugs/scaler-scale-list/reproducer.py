"""PyTorch counterpart of reproducer.R (beside this file): GradScaler.scale() of a list of losses scales each one, as
the AMP examples' loop with several losses may call it; (1.5, 0.25) scaled by 4 is (6.0, 1.0). Exits 1 only if PyTorch
changed."""
import sys

import torch

scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
scaled = scaler.scale([torch.tensor(1.5), torch.tensor(0.25)])
values = [float(t) for t in scaled]
print(f"PyTorch: scale() of a list gives {tuple(values)}")
sys.exit(0 if values == [6.0, 1.0] else 1)
