# R torch bug: nnf_multilabel_soft_margin_loss reduces over the batch (class_dim <- input$dim() - 1 is 0-based thinking
# in a 1-based API) and promotes a bfloat16 loss to float32 (R/nnf-loss.R at mlverse/torch e4de110).
# Input zeros (2, 3), target ones: PyTorch's reduction "none" gives 2 values (one per sample), in the input's dtype.
# Exits 1 while the bug exists (R: 3 values; bfloat16 in, float32 out).
suppressPackageStartupMessages(library(torch))
none <- nnf_multilabel_soft_margin_loss(torch_zeros(2, 3), torch_ones(2, 3), reduction = "none")
dtype <- nnf_multilabel_soft_margin_loss(torch_zeros(2, 3, dtype = torch_bfloat16()), torch_ones(2, 3, dtype = torch_bfloat16()))$dtype
cat(sprintf("R torch: reduction none gives %d values; a bfloat16 input gives a %s loss\n", none$numel(), as.character(dtype)))
cat("PyTorch: reduction none gives 2 values; a bfloat16 input gives a BFloat16 loss\n")
if (none$numel() != 2 || as.character(dtype) != "BFloat16") { cat("BUG: multilabel soft margin loss reduces the wrong dimension or promotes\n"); quit(status = 1) }
cat("fixed\n")
