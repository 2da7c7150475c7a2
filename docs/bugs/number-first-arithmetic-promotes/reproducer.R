# R torch bug: arithmetic with a number first (1 - x, 2 * x, 1 / x) makes the number a 1-element float32 tensor
# (R/operators.R at mlverse/torch e4de110), which promotes a bfloat16 x to float32; PyTorch keeps bfloat16.
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
x <- torch_ones(2, dtype = torch_bfloat16())
got <- c(`1 - x` = as.character((1 - x)$dtype), `2 * x` = as.character((2 * x)$dtype), `x - 1` = as.character((x - 1)$dtype))
cat(sprintf("R torch: %s\nPyTorch: every one BFloat16\n", paste(names(got), got, sep = " -> ", collapse = ", ")))
if (any(got != "BFloat16")) { cat("BUG: a number first promotes a bfloat16 tensor to float32\n"); quit(status = 1) }
cat("fixed\n")
