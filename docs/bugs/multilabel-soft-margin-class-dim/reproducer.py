"""PyTorch counterpart of reproducer.R (beside this file): multilabel soft margin loss, one value per sample, in the
input's dtype. Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch
import torch.nn.functional as F

none = F.multilabel_soft_margin_loss(torch.zeros(2, 3), torch.ones(2, 3), reduction="none")
dtype = F.multilabel_soft_margin_loss(torch.zeros(2, 3, dtype=torch.bfloat16), torch.ones(2, 3, dtype=torch.bfloat16)).dtype
print(f"PyTorch: reduction none gives {none.numel()} values; a bfloat16 input gives a {dtype} loss")
sys.exit(0 if none.numel() == 2 and dtype == torch.bfloat16 else 1)
