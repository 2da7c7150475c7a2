# R torch bug: nn_init_calculate_gain() has no "selu" (R/nn-init.R:69-89 at mlverse/torch e4de110: linear, conv*,
# sigmoid, tanh, relu, leaky_relu, else "Unsupported nonlinearity"), so nn_init_kaiming_uniform_() and
# nn_init_kaiming_normal_(), which call it, stop on nonlinearity = "selu". PyTorch's calculate_gain("selu") is 3/4
# (torch/nn/init.py:239-241), and kaiming_*_(w, nonlinearity="selu") initialises w.
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
said <- c(
  calculate_gain = tryCatch(format(nn_init_calculate_gain("selu")), error = conditionMessage),
  kaiming_normal_ = tryCatch({ nn_init_kaiming_normal_(torch_empty(5, 3), nonlinearity = "selu"); "ran" }, error = conditionMessage),
  kaiming_uniform_ = tryCatch({ nn_init_kaiming_uniform_(torch_empty(5, 3), nonlinearity = "selu"); "ran" }, error = conditionMessage)
)
for (name in names(said)) cat(sprintf("R torch %s(selu): %s\n", name, said[[name]]))
cat("PyTorch: calculate_gain('selu') = 0.75; kaiming_normal_ and kaiming_uniform_ run\n")
if (!identical(said[["calculate_gain"]], "0.75") || any(said[-1] != "ran")) {
  cat("BUG: nn_init_calculate_gain has no 'selu'\n"); quit(status = 1)
}
cat("fixed: 'selu' has its gain\n")
