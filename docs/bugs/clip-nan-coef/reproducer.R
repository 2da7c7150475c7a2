# R torch bug: nn_utils_clip_grad_norm_() stops with "missing value where TRUE/FALSE needed" when the total
# norm is NaN (a NaN in any gradient), at `if (clip_coef$item() < 1)` (R/nn-utils-clip-grad.R:40 at
# mlverse/torch e4de110). PyTorch's clip_grad_norm_ (error_if_nonfinite=False, the default) returns the NaN
# norm and multiplies the gradients by clamp(coef, max=1) = NaN (torch/nn/utils/clip_grad.py:164-180 in 2.13.0),
# so a GradScaler sees the non-finite gradients and skips the step; in R the training loop dies instead.
# grad (NaN, 1), max_norm 1. Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
x <- torch_tensor(c(1, 2), requires_grad = TRUE)
x$grad <- torch_tensor(c(NaN, 1))
res <- tryCatch(nn_utils_clip_grad_norm_(list(x), max_norm = 1), error = function(e) e)
if (inherits(res, "error")) {
  cat(sprintf("BUG: R torch nn_utils_clip_grad_norm_ errors on a NaN norm: %s\n", conditionMessage(res)))
  cat("PyTorch: total norm nan, grad (nan, nan)\n")
  quit(status = 1)
}
cat(sprintf("R torch: total norm %s, grad (%s)\n", format(res$item()), toString(as_array(x$grad))))
cat("fixed: no error on a NaN norm\n")
