# R torch bug: nnf_kl_div(reduction = "batchmean") divides a 0-d input's loss by input$size(1), which is NA for a 0-d
# tensor (R/nnf-loss.R at mlverse/torch e4de110). PyTorch gives the sum, 0.1534. Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
got <- nnf_kl_div(torch_scalar_tensor(-1), torch_scalar_tensor(0.5), reduction = "batchmean")$item()
cat(sprintf("R torch: %.6g\nPyTorch: 0.1534\n", got))
if (abs(got - 0.1534264) > 1e-4) { cat("BUG: batchmean of a 0-d input divides by NA\n"); quit(status = 1) }
cat("fixed\n")
