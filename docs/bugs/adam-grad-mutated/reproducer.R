# R torch bug (side effect): optim_adam with weight_decay adds weight_decay * param INTO param$grad
# (R/optim-adam.R:79 at mlverse/torch e4de110: `grad$add_(param, alpha = group$weight_decay)`, in place on
# param$grad). PyTorch's Adam leaves .grad alone (`grad = grad.add(param, alpha=weight_decay)`,
# torch/optim/adam.py:428 in 2.13.0). Anything that reads the gradient after step() (logging, a second
# optimizer on the same parameters, gradient accumulation that steps before zero_grad) sees another gradient.
# x = (10, 20), grad (1, 1), weight_decay 0.1: after step(), PyTorch's grad (1, 1), R torch's (2, 3).
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
x <- torch_tensor(c(10, 20), requires_grad = TRUE)
opt <- optim_adam(list(x), lr = 0.1, weight_decay = 0.1)
x$grad <- torch_ones(2)
invisible(opt$step())
g <- as_array(x$grad)
cat(sprintf("R torch: grad after step (%s); PyTorch: (1, 1)\n", toString(g)))
if (!isTRUE(all.equal(g, c(1, 1)))) { cat("BUG: optim_adam's weight decay changes param$grad\n"); quit(status = 1) }
cat("fixed: optim_adam leaves param$grad alone\n")
