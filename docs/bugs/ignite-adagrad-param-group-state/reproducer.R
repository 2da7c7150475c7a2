# R torch bug: optim_ignite_adagrad() with two or more param groups stops at its first step
# (R torch 0.17.0.9000, `print(torch:::OptimizerIgnite$public_methods$initialize)`: it builds the C++ optimizer from the first group
# and adds the others with add_param_group(); libtorch's Adagrad creates each parameter's state ("sum", "step") in its
# constructor only, torch/csrc/api/include/torch/optim/adagrad.h:73-83, so a parameter of a later group has none and
# Adagrad::step asserts). PyTorch's Adagrad takes the groups (reproducer.py beside this file). Exits 1 while it fails.
suppressPackageStartupMessages(library(torch))
w <- torch_tensor(c(1, 2), requires_grad = TRUE)
b <- torch_tensor(c(3), requires_grad = TRUE)
opt <- optim_ignite_adagrad(list(list(params = list(w)), list(params = list(b), lr = 0.05)), lr = 0.1)
w$grad <- torch_ones(2)
b$grad <- torch_ones(1)
res <- tryCatch({
  opt$step()
  NULL
}, error = function(e) conditionMessage(e))
if (!is.null(res)) {
  cat(sprintf("BUG: optim_ignite_adagrad with two param groups fails at step(): %s\n", sub("\n.*", "", res)))
  quit(status = 1)
}
cat(sprintf("fixed: w (%s), b (%s)\n", toString(as_array(w)), toString(as_array(b))))
