# R torch bug: cuda_amp_grad_scaler()'s step() checks the gradients a second time (R/autocast.R at mlverse/torch
# e4de110: `.maybe_opt_step` calls `.check_inf_per_device`, which overwrites what unscale_() recorded). The AMP recipe's
# unscale_, clip, step sequence with a clip by value clamps an overflow to the clip value, so R steps on it and grows
# the scale; PyTorch's GradScaler decides from what unscale_() found, skips and backs off (reproducer.py beside this
# file). Runs on CPU: only scale() is CUDA-only, so the scale is initialised directly. Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
w <- torch_tensor(c(1, 2), requires_grad = TRUE)
opt <- optim_sgd(list(w), lr = 0.1)
scaler <- cuda_amp_grad_scaler(init_scale = 4)
scaler$.lazy_init_scale_growth_tracker(torch_device("cpu"))
w$grad <- torch_tensor(c(Inf, 8)) # an overflow in the scaled gradient
invisible(scaler$unscale_(opt))
invisible(nn_utils_clip_grad_value_(list(w), clip_value = 1))
invisible(scaler$step(opt))
invisible(scaler$update())
if (!identical(as_array(w), c(1, 2))) {
  cat(sprintf("BUG: the scaler stepped on an overflow that unscale_() found: w (%s), scale %g\n",
              toString(as_array(w)), scaler$.scale$item()))
  quit(status = 1)
}
cat(sprintf("fixed: the step was skipped; w (%s), scale %g\n", toString(as_array(w)), scaler$.scale$item()))
