# R torch bug: nn_utils_clip_grad_norm_(norm_type = Inf) makes the total norm `torch_tensor(total_norm, device =
# device)` from an R double (R/nn-utils-clip-grad.R:29-31 at mlverse/torch e4de110): R torch's default dtype, float32,
# whatever the gradients' dtype. PyTorch's clip_grad_norm_ takes vector_norm of the gradients (torch/nn/utils/
# clip_grad.py:95-106, 2.13.0): a norm of the gradients' dtype. So R clips bfloat16 gradients with a float32
# coefficient, and rounds a float64 gradient's norm to float32.
# grad (1.7, 0.3) in bfloat16, max_norm 0.1; grad 0.1 in float64. Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
x <- torch_zeros(2, dtype = torch_bfloat16(), requires_grad = TRUE)
x$grad <- torch_tensor(c(1.7, 0.3), dtype = torch_bfloat16())
norm <- nn_utils_clip_grad_norm_(list(x), max_norm = 0.1, norm_type = Inf)
clipped <- as.numeric(x$grad$to(dtype = torch_float32())[1])
y <- torch_zeros(1, dtype = torch_float64(), requires_grad = TRUE)
y$grad <- torch_tensor(0.1, dtype = torch_float64())
norm64 <- nn_utils_clip_grad_norm_(list(y), max_norm = 1, norm_type = Inf)
if (norm$dtype != torch_bfloat16() || norm64$item() != 0.1) {
  cat(sprintf("BUG: R torch's infinity norm is %s for bfloat16 gradients (clipped grad %.10g) and %s %.17g for the float64 gradient 0.1\n",
              as.character(norm$dtype), clipped, as.character(norm64$dtype), norm64$item()))
  cat("PyTorch: bfloat16 norm, clipped grad 0.099609375; float64 norm 0.1\n")
  quit(status = 1)
}
cat(sprintf("R torch: norm %s, clipped grad %.10g; float64 norm %.17g\n", as.character(norm$dtype), clipped, norm64$item()))
cat("fixed: the infinity norm keeps the gradients' dtype\n")
