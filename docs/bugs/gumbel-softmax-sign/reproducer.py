"""PyTorch counterpart of reproducer.R (beside this file): gumbel_softmax's hard samples follow softmax(logits).

100000 hard samples of logits (0, 1, 2) after seed 0: class shares within 0.01 of softmax (0.090, 0.245, 0.665).
Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(0)
logits = torch.tensor([0.0, 1.0, 2.0])
shares = F.gumbel_softmax(logits.expand(100000, 3), hard=True).mean(0)
expected = logits.softmax(0)
print(f"PyTorch, 100000 hard samples of logits (0, 1, 2): class shares {[round(v, 4) for v in shares.tolist()]}; "
      f"softmax {[round(v, 4) for v in expected.tolist()]}")
sys.exit(0 if (shares - expected).abs().max().item() < 0.01 else 1)
