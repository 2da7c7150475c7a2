"""PyTorch counterpart of reproducer.R (beside this file) (exits 1 only if PyTorch itself changed)."""
import sys

import torch

emb = torch.nn.Embedding(4, 2, padding_idx=0)
emb(torch.tensor([0, 1, 2, 0])).sum().backward()
rows = emb.weight.grad[:, 0].tolist()
print(f"PyTorch: row gradients {tuple(rows)}")
sys.exit(0 if rows == [0.0, 1.0, 1.0, 0.0] else 1)
