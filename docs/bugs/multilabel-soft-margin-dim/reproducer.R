# R torch bug: nnf_multilabel_soft_margin_loss() sums over the BATCH and divides by the batch size, where PyTorch sums
# over the classes and divides by their number: R/nnf-loss.R:205-207 (mlverse/torch e4de110) copies PyTorch's
# class_dim = input.dim() - 1 (0-based: the last dim) into R, whose dims are 1-based: class_dim is then the
# second-to-last dim (the batch of an N x C input), and C = input$size(class_dim) is N.
# For a 2 x 3 input: reduction "none" gives 3 values (per class) instead of 2 (per sample), "sum" gives total / 2
# instead of total / 3; "mean" happens to agree (total / (N * C) either way).
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
x <- torch_tensor(rbind(c(0.5, -1, 2), c(1.5, 0.25, -0.75)))
y <- torch_tensor(rbind(c(1, 0, 1), c(0, 1, 1)))
none <- nnf_multilabel_soft_margin_loss(x, y, reduction = "none")
total <- nnf_multilabel_soft_margin_loss(x, y, reduction = "sum")
per_element <- -(y * nnf_logsigmoid(x) + (1 - y) * nnf_logsigmoid(-x))
expected_none <- as_array(per_element$sum(2) / 3)
cat(sprintf("R torch: reduction 'none' has shape %s: %s; 'sum' %.6f\n", paste(none$shape, collapse = "x"),
            toString(round(as_array(none), 6)), as.numeric(total)))
cat(sprintf("PyTorch: reduction 'none' has shape 2: %s; 'sum' %.6f\n", toString(round(expected_none, 6)), sum(expected_none)))
if (!identical(none$shape, 2L) || abs(as.numeric(total) - sum(expected_none)) > 1e-6) {
  cat("BUG: nnf_multilabel_soft_margin_loss reduces over the batch, not the classes\n"); quit(status = 1)
}
cat("fixed: nnf_multilabel_soft_margin_loss averages over the classes\n")
