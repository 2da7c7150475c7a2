# R torch bug: nn_init_eye_() does not check that the tensor is 2-D (R/nn-init.R:198-201 at mlverse/torch e4de110):
# torch_eye_out(tensor, size[1], size[2]) then RESIZES a conv weight of shape 4x3x3x3 to a 4x3 identity, silently.
# PyTorch's eye_ refuses any tensor that is not 2-D (torch/nn/init.py:394-395).
# Exits 1 while the bug exists (the 4-D weight comes back 4x3).
suppressPackageStartupMessages(library(torch))
w <- torch_empty(4, 3, 3, 3)
said <- tryCatch({ nn_init_eye_(w); "ran" }, error = conditionMessage)
cat(sprintf("R torch nn_init_eye_(4x3x3x3 weight): %s; the weight's shape is now %s\n", said, paste(w$shape, collapse = "x")))
cat("PyTorch: ValueError: Only tensors with 2 dimensions are supported; the weight keeps its shape\n")
if (!identical(w$shape, c(4L, 3L, 3L, 3L))) { cat("BUG: nn_init_eye_ resized a 4-D tensor to 2-D\n"); quit(status = 1) }
cat("fixed: nn_init_eye_ refuses a tensor that is not 2-D\n")
