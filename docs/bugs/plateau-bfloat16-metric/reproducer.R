# R torch bug: lr_reduce_on_plateau()'s step() stops on a bfloat16 metric (R/optim-lr_scheduler.R at mlverse/torch
# e4de110: `current <- as.numeric(metrics)`; as_array()'s C++ cpp_as_array() converts Float and Half through float64 but
# stops on BFloat16). A loop whose weights are bfloat16 feeds the scheduler a bfloat16 loss; PyTorch's
# ReduceLROnPlateau reads float(metrics) (reproducer.py beside this file). Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
weight <- torch_tensor(c(1, 2), dtype = torch_bfloat16(), requires_grad = TRUE)
opt <- optim_sgd(list(weight), lr = 0.1)
scheduler <- lr_reduce_on_plateau(opt, factor = 0.5, patience = 0)
loss <- (weight * weight)$mean() # a bfloat16 loss, as bfloat16 weights give
res <- tryCatch({
  scheduler$step(loss$detach())
  scheduler$step(loss$detach()) # no better than the best: with patience 0 the lr halves
  NULL
}, error = function(e) conditionMessage(e))
if (!is.null(res)) {
  cat(sprintf("BUG: the scheduler's step() fails on a bfloat16 loss: %s\n", sub("\n.*", "", res)))
  quit(status = 1)
}
cat(sprintf("fixed: the scheduler stepped; lr %s\n", opt$param_groups[[1]]$lr))
