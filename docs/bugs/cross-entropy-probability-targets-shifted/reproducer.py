"""PyTorch counterpart of reproducer.R (beside this file) (exits 1 only if PyTorch itself changed)."""
import sys

import torch

logits = torch.tensor([[0.5, 0.1], [0.2, 0.3]])
probs = torch.tensor([[0.25, 0.75], [0.5, 0.5]])
got = float(torch.nn.CrossEntropyLoss()(logits, probs))
print(f"PyTorch: nn.CrossEntropyLoss with probability targets = {got:.5f}")
sys.exit(0 if abs(got - 0.75371) < 1e-4 else 1)
