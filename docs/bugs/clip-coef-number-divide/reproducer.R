# R torch bug: nn_utils_clip_grad_norm_() computes the clip coefficient of a bfloat16 gradient norm in float32:
# `clip_coef <- max_norm / (total_norm + 1e-6)` (R/nn-utils-clip-grad.R:38 at mlverse/torch e4de110) goes through
# `/.torch_tensor` (R/operators.R), which makes the number a float32 tensor of shape [1] that wins type promotion over
# the 0-dim bfloat16 norm. PyTorch's max_norm / (total_norm + 1e-6) is Tensor.__rtruediv__ (torch/_tensor.py, 2.13.0):
# the number stays a scalar and the coefficient is bfloat16, so the two clip bfloat16 gradients differently.
# grad (1.7, 0) in bfloat16, max_norm 0.1. Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
x <- torch_zeros(2, dtype = torch_bfloat16(), requires_grad = TRUE)
x$grad <- torch_tensor(c(1.7, 0), dtype = torch_bfloat16())
total_norm <- torch_norm(torch_stack(list(torch_norm(x$grad, 2))), 2)
coef <- 0.1 / (total_norm + 1e-6)
invisible(nn_utils_clip_grad_norm_(list(x), max_norm = 0.1))
clipped <- as.numeric(x$grad$to(dtype = torch_float32())[1])
if (coef$dtype != torch_bfloat16()) {
  cat(sprintf("BUG: R torch's clip coefficient is %s for a bfloat16 norm; clipped grad %.10g\n",
              as.character(coef$dtype), clipped))
  cat("PyTorch: coefficient bfloat16 0.05859375, clipped grad 0.099609375\n")
  quit(status = 1)
}
cat(sprintf("R torch: coefficient %s, clipped grad %.10g\n", as.character(coef$dtype), clipped))
cat("fixed: the coefficient keeps the norm's dtype\n")
