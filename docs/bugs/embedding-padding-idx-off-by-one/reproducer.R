# R torch bug: nn_embedding(padding_idx = k) zeroes row k at init (1-based, as R counts) but its forward passes k
# unchanged to libtorch's 0-based torch_embedding: the gradient is withheld from row k + 1 instead of row k
# (`print(torch::nnf_embedding)` at mlverse/torch e4de110: `torch_embedding(weight = weight, indices = input,
# padding_idx = padding_idx, ...)`, no `- 1`).
# nn_embedding(4, 2, padding_idx = 1), tokens (1, 2, 3, 1), loss = sum of the output: PyTorch (padding_idx = 0, tokens
# 0, 1, 2, 0) gives row gradients (0, 1, 1, 0); R gives (2, 0, 1, 0).
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
emb <- nn_embedding(4, 2, padding_idx = 1)
tokens <- torch_tensor(c(1L, 2L, 3L, 1L), dtype = torch_long())
emb(tokens)$sum()$backward()
rows <- as.numeric(as_array(emb$weight$grad)[, 1])
cat(sprintf("R torch: row gradients (%s)\n", toString(rows)))
cat("PyTorch: row gradients (0, 1, 1, 0)\n")
if (!identical(rows, c(0, 1, 1, 0))) {
  cat("BUG: the padding row gets a gradient and the row after it does not\n"); quit(status = 1)
}
