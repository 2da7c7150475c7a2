# R torch bug: max pooling with return_indices = TRUE shifts the indices in place (out[[2]]$add_(1L, 1L), R/wrapers.R at
# mlverse/torch e4de110), and libtorch saved them for the backward: the backward stops. Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
x <- torch_randn(1, 1, 4, 4, requires_grad = TRUE)
out <- nnf_max_pool2d(x, 2, return_indices = TRUE)
err <- tryCatch({ out[[1]]$sum()$backward(); NULL }, error = function(e) conditionMessage(e))
cat(sprintf("R torch: %s\nPyTorch: the backward runs\n", if (is.null(err)) "the backward runs" else substr(err, 1, 100)))
if (!is.null(err)) { cat("BUG: the backward through max pooling with indices fails\n"); quit(status = 1) }
cat("fixed\n")
