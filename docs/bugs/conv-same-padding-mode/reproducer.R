# R torch bug: nn_conv1d/2d/3d(padding = "same", padding_mode = "reflect" | "replicate" | "circular") stops at forward.
# nn_conv_nd (R/nn-conv.R:41 at mlverse/torch e4de110) builds the padding for nnf_pad() as
# nn_util_reverse_repeat_tuple(self$padding, 2), which for the string "same" is c("same", "same"), and the forward
# (R/nn-conv.R:342-344 for 2-D) calls nnf_pad(input, c("same", "same"), ...). PyTorch (torch/nn/modules/conv.py:142-154)
# turns "same" into each dimension's padding, d * (k - 1) split left/right, before padding by the mode.
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
conv <- nn_conv2d(1, 1, 3, padding = "same", padding_mode = "reflect")
x <- torch_arange(1, 20)$view(c(1, 1, 4, 5))
said <- tryCatch(paste(conv(x)$shape, collapse = "x"), error = function(e) paste("error:", conditionMessage(e)))
cat(sprintf("R torch nn_conv2d(padding = 'same', padding_mode = 'reflect') of a 1x1x4x5 input: %s\n", said))
cat("PyTorch: an output of shape 1x1x4x5 (the input reflected by 1 on each side, then the 3x3 convolution)\n")
if (!identical(said, "1x1x4x5")) { cat("BUG: padding = 'same' fails with a padding_mode other than 'zeros'\n"); quit(status = 1) }
cat("fixed: padding = 'same' works with every padding_mode\n")
