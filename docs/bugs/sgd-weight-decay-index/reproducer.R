# R torch bug: optim_sgd's weight decay adds the parameter's INDEX in its group, not the parameter
# (R/optim-sgd.R:79 at mlverse/torch e4de110: `d_p <- d_p$add(p, alpha = weight_decay)`, p = loop index).
# Two parameters x1 = (10, 20), x2 = (10, 20); lr 1, weight_decay 0.1, zero gradients, two steps.
# PyTorch (SGD): x <- x - lr * wd * x  ->  (9, 18) then (8.1, 16.2), for both parameters.
# Exits 1 while the bug exists (R gives x1 (9.9, 19.9) then (9.8, 19.8), x2 (9.8, 19.8) then (9.6, 19.6)).
suppressPackageStartupMessages(library(torch))
x1 <- torch_tensor(c(10, 20), requires_grad = TRUE)
x2 <- torch_tensor(c(10, 20), requires_grad = TRUE)
opt <- optim_sgd(list(x1, x2), lr = 1, weight_decay = 0.1)
got <- list()
for (s in 1:2) {
  x1$grad <- torch_zeros(2); x2$grad <- torch_zeros(2)
  opt$step()
  got[[s]] <- rbind(x1 = as_array(x1), x2 = as_array(x2))
  cat(sprintf("R torch step %d: x1 (%s)  x2 (%s)\n", s, toString(signif(got[[s]]["x1", ], 6)), toString(signif(got[[s]]["x2", ], 6))))
}
expected <- c(10, 20) * 0.9^2
cat(sprintf("PyTorch step 2: x1 (%s)  x2 (%s)\n", toString(expected), toString(expected)))
bug <- !isTRUE(all.equal(unname(got[[2]]["x1", ]), expected, tolerance = 1e-6)) ||
  !isTRUE(all.equal(unname(got[[2]]["x2", ]), expected, tolerance = 1e-6))
if (bug) { cat("BUG: optim_sgd's weight decay uses the parameter index\n"); quit(status = 1) }
cat("fixed: optim_sgd's weight decay uses the parameter\n")
