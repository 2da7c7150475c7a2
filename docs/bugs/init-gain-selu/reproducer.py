"""PyTorch counterpart of reproducer.R (beside this file): calculate_gain("selu") is 3/4, and the kaiming inits take it.

Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

gain = torch.nn.init.calculate_gain("selu")
torch.manual_seed(0)
normal = torch.nn.init.kaiming_normal_(torch.empty(5, 3), nonlinearity="selu")
uniform = torch.nn.init.kaiming_uniform_(torch.empty(5, 3), nonlinearity="selu")
print(f"PyTorch calculate_gain(selu): {gain}; kaiming_normal_ and kaiming_uniform_ ran (std {normal.std().item():.3f})")
sys.exit(0 if gain == 0.75 else 1)
