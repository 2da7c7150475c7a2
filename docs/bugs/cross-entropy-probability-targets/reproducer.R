# R torch bug: nnf_cross_entropy() / nn_cross_entropy_loss() with class-probability targets (a float target of the
# input's shape, which PyTorch accepts) treat the probabilities as 1-based class indices: torch_cross_entropy_loss()
# (R/with-indices.R:110-118 at mlverse/torch e4de110) calls to_index_tensor(target), which subtracts 1 from every non-negative
# value (src/utils.cpp:21-46) and refuses a 0. So soft targets give a wrong loss silently (-sum((p - 1) * log_softmax)),
# and one-hot float targets stop with "Indexing starts at 1 but found a 0.".
# PyTorch (torch/nn/functional.py:3489-3516): "Ground truth class indices or class probabilities".
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
input <- torch_tensor(rbind(c(1, 2, 3), c(1, 0, -1)))
soft <- torch_tensor(rbind(c(0.2, 0.3, 0.5), c(0.6, 0.3, 0.1)))
expected <- as.numeric(-(soft * nnf_log_softmax(input, 2))$sum(2)$mean())
got <- as.numeric(nnf_cross_entropy(input, soft))
one_hot <- torch_tensor(rbind(c(0, 0, 1), c(1, 0, 0)))
said <- tryCatch(format(as.numeric(nnf_cross_entropy(input, one_hot))), error = function(e) paste("error:", conditionMessage(e)))
cat(sprintf("R torch: soft targets %.6f (PyTorch's definition: %.6f); one-hot float targets: %s\n", got, expected, said))
cat(sprintf("PyTorch: soft targets %.6f; one-hot float targets %.6f\n", expected,
            as.numeric(-(one_hot * nnf_log_softmax(input, 2))$sum(2)$mean())))
if (abs(got - expected) > 1e-6 || startsWith(said, "error")) {
  cat("BUG: cross entropy reads class-probability targets as 1-based class indices\n"); quit(status = 1)
}
cat("fixed: cross entropy takes class-probability targets\n")
