# R torch bug: cuda_amp_grad_scaler()'s unscale_() (and so step()) stops on a parameter without a gradient
# (R/autocast.R at mlverse/torch e4de110: `.unscale_grads_` hands every `group$params` to
# `cpp_amp_foreach_non_finite_check_and_unscale`, whose C++ reads each one's grad; an undefined grad has no device).
# A frozen parameter (requires_grad FALSE) handed to the optimizer, as a fine-tuning loop does: PyTorch's GradScaler
# skips a parameter whose grad is None (reproducer.py beside this file). Runs on CPU: only scale() is CUDA-only, so the
# scale is initialised directly. Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
trained <- torch_tensor(c(1, 2), requires_grad = TRUE)
frozen <- torch_tensor(c(3, 4), requires_grad = FALSE)
opt <- optim_sgd(list(trained, frozen), lr = 0.1)
scaler <- cuda_amp_grad_scaler(init_scale = 4)
scaler$.lazy_init_scale_growth_tracker(torch_device("cpu"))
trained$grad <- torch_tensor(c(4, 8)) # the gradient of a loss scaled by 4
res <- tryCatch({
  scaler$step(opt)
  scaler$update()
  NULL
}, error = function(e) conditionMessage(e))
if (!is.null(res)) {
  cat(sprintf("BUG: the scaler's step() fails on a parameter without a gradient: %s\n", sub("\n.*", "", res)))
  quit(status = 1)
}
cat(sprintf("fixed: the scaler stepped; trained (%s), frozen (%s)\n", toString(as_array(trained)), toString(as_array(frozen))))
