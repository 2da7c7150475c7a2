# R torch bug: lr_one_cycle() stops on an optimizer with two param groups (R/optim-lr_scheduler.R at mlverse/torch
# e4de110: initialize makes `max_momentums`, one value per group, but sets each group's momentum or beta1 from
# `max_momentum[[i]]`, the argument, which has one element). PyTorch's OneCycleLR reads the per-group list
# (reproducer.py beside this file). Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
w <- torch_tensor(c(1, 2), requires_grad = TRUE)
b <- torch_tensor(c(3), requires_grad = TRUE)
opt <- optim_adam(list(list(params = list(w)), list(params = list(b), lr = 0.05)), lr = 0.1)
res <- tryCatch({
  lr_one_cycle(opt, max_lr = 0.1, total_steps = 10)
  NULL
}, error = function(e) conditionMessage(e))
if (!is.null(res)) {
  cat(sprintf("BUG: lr_one_cycle with two param groups fails: %s\n", sub("\n.*", "", res)))
  quit(status = 1)
}
cat(sprintf("fixed: beta1 of the groups %s\n", toString(sapply(opt$param_groups, function(g) g$betas[[1]]))))
