# R torch bug: the ignite optimizers' zero_grad() takes no set_to_none argument ("unused argument"), where R torch's
# R-code optimizers take one (Optimizer$zero_grad = function(set_to_none = FALSE), R/optim.R) and PyTorch's every optimizer
# does (reproducer.py beside this file). OptimizerIgnite$zero_grad (mlverse/torch e4de110) is function() calling
# rcpp_ignite_optim_zero_grad(self$ptr), whose C++ (src/lantern/src/Ignite.cpp) calls libtorch's opt->zero_grad()
# with its default, set_to_none true: a loop that zeroes the grads (set_to_none = FALSE) cannot say so. Exits 1 while
# the bug exists.
suppressPackageStartupMessages(library(torch))
w <- torch_tensor(c(1, 2), requires_grad = TRUE)
opt <- optim_ignite_adam(list(w), lr = 0.1)
w$grad <- torch_tensor(c(4, 8))
res <- tryCatch({
  opt$zero_grad(set_to_none = FALSE)
  NULL
}, error = function(e) conditionMessage(e))
if (!is.null(res)) {
  cat(sprintf("BUG: optim_ignite_adam()$zero_grad(set_to_none = FALSE) fails: %s\n", sub("\n.*", "", res)))
  quit(status = 1)
}
cat(sprintf("fixed: the grad is zeroed and kept: (%s)\n", toString(as_array(w$grad))))
