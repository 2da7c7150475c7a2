# R torch bug: optim_rmsprop's weight decay adds the parameter's INDEX in its group, not the parameter
# (R/optim-rmsprop.R:79 at mlverse/torch e4de110: `grad <- grad$add(p, alpha = group[["weight_decay"]])`).
# x1 = x2 = (10, 20), lr 0.1, alpha 0.9, weight_decay 0.1, zero gradients, one step.
# PyTorch (RMSprop): g = wd * x = (1, 2); square_avg = 0.1 g^2; x <- x - lr g / (sqrt(square_avg) + eps)
#   = x - 0.1 / sqrt(0.1) = (9.6838, 19.6838) for both parameters.
# R adds wd * index: x1 gets g = (0.1, 0.1), x2 gets (0.2, 0.2): the same -0.3162 step only by accident of
# the normalisation; the square_avg shows it: R (0.001, 0.001) / (0.004, 0.004), PyTorch (0.1, 0.4).
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
x1 <- torch_tensor(c(10, 20), requires_grad = TRUE)
x2 <- torch_tensor(c(10, 20), requires_grad = TRUE)
opt <- optim_rmsprop(list(x1, x2), lr = 0.1, alpha = 0.9, weight_decay = 0.1)
x1$grad <- torch_zeros(2); x2$grad <- torch_zeros(2)
invisible(opt$step())
sa1 <- as_array(opt$state$get(x1)$square_avg); sa2 <- as_array(opt$state$get(x2)$square_avg)
cat(sprintf("R torch: x1 (%s) square_avg (%s); x2 (%s) square_avg (%s)\n",
            toString(signif(as_array(x1), 6)), toString(signif(sa1, 6)), toString(signif(as_array(x2), 6)), toString(signif(sa2, 6))))
cat("PyTorch: x1 (9.68377, 19.6838) square_avg (0.1, 0.4); x2 the same\n")
if (!isTRUE(all.equal(sa1, c(0.1, 0.4), tolerance = 1e-5)) || !isTRUE(all.equal(sa2, c(0.1, 0.4), tolerance = 1e-5))) {
  cat("BUG: optim_rmsprop's weight decay uses the parameter index\n"); quit(status = 1)
}
cat("fixed: optim_rmsprop's weight decay uses the parameter\n")
