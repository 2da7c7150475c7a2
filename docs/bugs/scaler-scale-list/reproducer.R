# R torch bug: cuda_amp_grad_scaler()'s scale() of a list of tensors stops with "'self$.scale' is not a function"
# (R/autocast.R at mlverse/torch e4de110: `if (is.list(outputs)) lapply(outputs, self$.scale)` hands the scale tensor to
# lapply() as the function). PyTorch's GradScaler.scale() scales each tensor of a list (reproducer.py beside this file),
# as PyTorch's AMP examples' "multiple models, losses and optimizers" loop may use it. Runs on CPU: the list branch comes
# before any device check, and the scale is initialised directly as a first scale() of a CUDA tensor would. Exits 1
# while the bug exists.
suppressPackageStartupMessages(library(torch))
scaler <- cuda_amp_grad_scaler(init_scale = 4)
scaler$.lazy_init_scale_growth_tracker(torch_device("cpu"))
losses <- list(torch_tensor(1.5), torch_tensor(0.25))
res <- tryCatch(scaler$scale(losses), error = function(e) conditionMessage(e))
if (is.character(res)) {
  cat(sprintf("BUG: the scaler's scale() of a list fails: %s\n", sub("\n.*", "", res)))
  quit(status = 1)
}
cat(sprintf("fixed: scale() of a list gives (%s)\n", toString(vapply(res, function(t) t$item(), 0))))
