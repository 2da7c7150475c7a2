"""PyTorch counterpart of reproducer.R (beside this file): cosine_embedding_loss and ctc_loss default to reduction="mean".

Each gives the same value with the default as with reduction="mean". Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(0)
a, b, y = torch.randn(3, 4), torch.randn(3, 4), torch.tensor([1.0, -1.0, 1.0])
log_probs, targets = torch.randn(5, 1, 4).log_softmax(2), torch.tensor([[1, 2]])
cosine = F.cosine_embedding_loss(a, b, y).item(), F.cosine_embedding_loss(a, b, y, reduction="mean").item()
ctc = (F.ctc_loss(log_probs, targets, [5], [2]).item(), F.ctc_loss(log_probs, targets, [5], [2], reduction="mean").item())
print(f"PyTorch cosine_embedding_loss default {cosine[0]:.6f}, mean {cosine[1]:.6f}; ctc_loss default {ctc[0]:.6f}, mean {ctc[1]:.6f}")
sys.exit(0 if cosine[0] == cosine[1] and ctc[0] == ctc[1] else 1)
