# R torch bug: nn_embedding(padding_idx = k) zeroes row k (1-based, R/nn-sparse.R:97-99 at mlverse/torch e4de110) but
# hands k unchanged to libtorch's embedding (R/nnf-embedding.R:39-42), whose padding_idx is 0-based: the gradient is
# masked for row k + 1 instead. So the padding row, zero at start, is trained like any token, and row k + 1, a real token,
# never learns. A negative padding_idx is made num_embeddings + padding_idx (R/nn-sparse.R:73), PyTorch's 0-based rule: -1
# zeroes the second-to-last row and masks the last one.
# PyTorch (torch/nn/modules/sparse.py:159-186): the row it zeroes is the row whose gradient is masked.
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
torch_manual_seed(0)
bad <- FALSE
for (p in c(1, 2, -1)) {
  e <- nn_embedding(4, 2, padding_idx = p)
  e(torch_tensor(1:4, dtype = torch_long()))$sum()$backward()
  zero_at_start <- which(as_array(e$weight$abs()$sum(2)) == 0)
  no_gradient <- which(as_array(e$weight$grad$abs()$sum(2)) == 0)
  cat(sprintf("R torch nn_embedding(4, 2, padding_idx = %d): row zeroed at start %s, row without gradient %s\n",
              p, toString(zero_at_start), toString(no_gradient)))
  bad <- bad || !identical(zero_at_start, no_gradient)
}
cat("PyTorch: the same row is zeroed at start and has no gradient (padding_idx 0, 1, -1: rows 0, 1, 3 of 0..3)\n")
if (bad) { cat("BUG: nn_embedding masks the gradient of the row after the padding row\n"); quit(status = 1) }
cat("fixed: the padding row is the row without gradient\n")
