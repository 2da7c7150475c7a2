# R torch bug: nnf_cosine_embedding_loss() and nnf_ctc_loss() stop when reduction is left at its default. Both declare
# reduction = c("mean", "sum", "none") (R/nnf-loss.R:142 and :306 at mlverse/torch e4de110) but, unlike the other losses,
# never call match.arg(reduction): reduction_enum() (R/reduction.R:24-32) then tests `x == "mean"` on the whole vector,
# and R stops with "the condition has length > 1". PyTorch's defaults are reduction="mean".
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
torch_manual_seed(0)
a <- torch_randn(3, 4); b <- torch_randn(3, 4); y <- torch_tensor(c(1, -1, 1))
log_probs <- torch_randn(5, 1, 4)$log_softmax(3); targets <- torch_tensor(matrix(c(1L, 2L), nrow = 1))
said <- c(
  cosine_embedding = tryCatch(sprintf("%.6f", as.numeric(nnf_cosine_embedding_loss(a, b, y))), error = conditionMessage),
  cosine_embedding_mean = sprintf("%.6f", as.numeric(nnf_cosine_embedding_loss(a, b, y, reduction = "mean"))),
  ctc = tryCatch(sprintf("%.6f", as.numeric(nnf_ctc_loss(log_probs, targets, 5L, 2L))), error = conditionMessage),
  ctc_mean = sprintf("%.6f", as.numeric(nnf_ctc_loss(log_probs, targets, 5L, 2L, reduction = "mean")))
)
for (name in names(said)) cat(sprintf("R torch %s: %s\n", name, said[[name]]))
cat("PyTorch: the default reduction is 'mean': the same value as with reduction = 'mean'\n")
if (said[["cosine_embedding"]] != said[["cosine_embedding_mean"]] || said[["ctc"]] != said[["ctc_mean"]]) {
  cat("BUG: the default reduction of nnf_cosine_embedding_loss / nnf_ctc_loss stops\n"); quit(status = 1)
}
cat("fixed: the default reduction is 'mean'\n")
