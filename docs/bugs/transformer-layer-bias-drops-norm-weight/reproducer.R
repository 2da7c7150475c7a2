# R torch bug: nn_transformer_encoder_layer(bias = FALSE) builds its layer norms with elementwise_affine = FALSE, so
# norm1.weight and norm2.weight are gone (R/nn-transformer.R at mlverse/torch e4de110); PyTorch keeps them.
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
got <- names(nn_transformer_encoder_layer(4, 2, 8, bias = FALSE)$parameters)
cat(sprintf("R torch: %s\nPyTorch: self_attn.in_proj_weight, self_attn.out_proj.weight, linear1.weight, linear2.weight, norm1.weight, norm2.weight\n", toString(got)))
if (!all(c("norm1.weight", "norm2.weight") %in% got)) { cat("BUG: bias = FALSE drops the layer norms' weights\n"); quit(status = 1) }
cat("fixed\n")
