# R torch bug: an R-code optimizer's load_state_dict() keeps each loaded state tensor's dtype and device
# (R/optim.R:142 at mlverse/torch e4de110: `torch_empty_like(x)$copy_(x)`, a copy like the loaded tensor, and no copy at
# all with .refer_to_state_dict = TRUE). PyTorch's Optimizer.load_state_dict() casts every floating-point state tensor
# but `step` to its parameter's dtype and device (torch/optim/optimizer.py:800-801 in 2.13.0,
# `_process_value_according_to_param_policy`, since pytorch/pytorch#3658). A checkpoint written by a run of another
# precision (float64 moments here; float32 ones into a bfloat16-weights model) makes R's resumed Adam compute its moments
# in that precision, and one written on CUDA fails R's first step on CPU.
# A float32 parameter, Adam's moments loaded as float64: PyTorch's are float32 after load_state_dict(), R torch's float64.
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
p <- torch_tensor(c(1, 2, 3), requires_grad = TRUE)
opt <- optim_adam(list(p), lr = 0.1)
saved <- opt$state_dict()
saved$state <- list("1" = list(step = 1, exp_avg = torch_tensor(c(0.1, 0.2, 0.3), dtype = torch_float64()),
                               exp_avg_sq = torch_tensor(c(0.01, 0.02, 0.03), dtype = torch_float64())))
opt$load_state_dict(saved)
loaded <- as.character(opt$state$get(p)$exp_avg$dtype)
cat(sprintf("R torch: exp_avg after load_state_dict is %s for a Float parameter; PyTorch: Float\n", loaded))
if (!identical(loaded, "Float")) { cat("BUG: load_state_dict() keeps the loaded state's dtype\n"); quit(status = 1) }
cat("fixed: load_state_dict() casts the state to the parameter's dtype\n")
