# R torch bug: nn_init_orthogonal_() draws its Gaussian matrix with torch_randn(rows, cols), in the default dtype
# (float32), whatever the tensor's dtype (R/nn-init.R:374 at mlverse/torch e4de110). PyTorch draws it in the tensor's
# dtype (tensor.new_empty((rows, cols)).normal_(0, 1)). So a float64 tensor gets a float32 matrix's QR, copied in: after the
# same seed its values are not PyTorch's, and they are the float32 result widened (the QR of a float32 matrix, orthogonal
# to float32 precision only: |Q^T Q - I| about 1e-7 where float64 gives 1e-16).
# Exits 1 while the bug exists (the float64 result equals the float32 one widened).
suppressPackageStartupMessages(library(torch))
torch_manual_seed(0)
w64 <- nn_init_orthogonal_(torch_empty(5, 3, dtype = torch_float64()))
torch_manual_seed(0)
w32 <- nn_init_orthogonal_(torch_empty(5, 3))
widened <- w32$to(dtype = torch_float64())
error <- (w64$t()$mm(w64) - torch_eye(3, dtype = torch_float64()))$abs()$max()$item()
cat(sprintf("R torch: float64 result equals the float32 one widened: %s; max |Q^T Q - I| = %.3g\n",
            torch_equal(w64, widened), error))
cat(sprintf("R torch w[1, ]: %s\n", paste(sprintf("%.17g", as_array(w64[1, ])), collapse = " ")))
if (torch_equal(w64, widened)) { cat("BUG: nn_init_orthogonal_ draws in float32 for a float64 tensor\n"); quit(status = 1) }
cat("fixed: nn_init_orthogonal_ draws in the tensor's dtype\n")
