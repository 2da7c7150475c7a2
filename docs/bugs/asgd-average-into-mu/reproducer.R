# R torch bug: optim_asgd crashes as soon as averaging starts, and would average into `mu` instead of `ax`
# (R/optim-asgd.R:73 at mlverse/torch e4de110:
#  `state(param)[["mu"]]$add_(param$sub(state(param)[["ax"]])$mul(state(param)[["mu"]]))`; mu is an R number).
# x = (10, 20), lr 0.1, t0 = 1, gradient = x each step (loss 0.5 |x|^2): mu becomes 1/2 after step 3, so step 4
# runs the averaging branch. PyTorch (ASGD): no error; ax after 5 steps = mean of the parameter after steps 3..5
# (PyTorch prints it, asgd_average_into_mu.py). Exits 1 while the bug exists (an error, or ax not that average).
suppressPackageStartupMessages(library(torch))
x <- torch_tensor(c(10, 20), requires_grad = TRUE)
opt <- optim_asgd(list(x), lr = 0.1, t0 = 1)
hist <- list()
res <- tryCatch({
  for (s in 1:5) {
    x$grad <- x$detach()$clone()
    opt$step()
    hist[[s]] <- as_array(x)
    cat(sprintf("R torch step %d: x (%s) mu %s ax (%s)\n", s, toString(signif(hist[[s]], 7)),
                format(opt$state$get(x)$mu), toString(signif(as_array(opt$state$get(x)$ax), 7))))
  }
  NULL
}, error = function(e) conditionMessage(e))
if (!is.null(res)) { cat(sprintf("BUG: optim_asgd fails once averaging starts (step %d): %s\n", length(hist) + 1L, res)); quit(status = 1) }
want <- Reduce(`+`, hist[3:5]) / 3
if (!isTRUE(all.equal(as_array(opt$state$get(x)$ax), want, tolerance = 1e-5))) { cat("BUG: ax is not the average\n"); quit(status = 1) }
cat("fixed: optim_asgd averages into ax\n")
