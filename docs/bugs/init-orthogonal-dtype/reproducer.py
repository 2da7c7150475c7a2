"""PyTorch counterpart of reproducer.R (beside this file): orthogonal_ draws its Gaussian matrix in the tensor's dtype.

A float64 weight after seed 0 is not the float32 result widened, and its columns are orthonormal to float64 precision.
Exits 1 only if PyTorch itself stopped doing so.
"""
import sys

import torch

torch.manual_seed(0)
w64 = torch.nn.init.orthogonal_(torch.empty(5, 3, dtype=torch.float64))
torch.manual_seed(0)
w32 = torch.nn.init.orthogonal_(torch.empty(5, 3))
error = (w64.t() @ w64 - torch.eye(3, dtype=torch.float64)).abs().max().item()
same = torch.equal(w64, w32.double())
print(f"PyTorch: float64 result equals the float32 one widened: {same}; max |Q^T Q - I| = {error:.3g}")
print("PyTorch w[0, :]:", " ".join(f"{v:.17g}" for v in w64[0].tolist()))
sys.exit(0 if not same and error < 1e-12 else 1)
