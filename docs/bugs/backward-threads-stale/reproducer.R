# R torch bug: torch_set_num_threads() does not reach the threads R torch runs backward on. Each backward runs on one of
# five pool threads (schedule_backward_task() in src/autograd.cpp at mlverse/torch e4de110), and libtorch gives a thread
# its OpenMP thread count once, at its first parallel op (at::internal::lazy_init_num_threads, ATen/Parallel.h). A pool
# thread that ran a backward before torch_set_num_threads(2) keeps 1 thread; whichever pool thread wakes runs the next one.
# A full sum splits its elements among the threads, so its float32 bits show the count: the gradient of
# (x * w)$sum() with respect to w is x$sum(), computed by the backward's thread.
# PyTorch (reproducer.py) runs a CPU backward on the calling thread: every gradient equals the forward sum at 2 threads.
# Exits 1 while the bug exists (some of the 60 gradients are the 1-thread sum).
suppressPackageStartupMessages(library(torch))
x <- torch_sin(torch_arange(0, 2^20 - 1))
w <- torch_tensor(1, requires_grad = TRUE)
gradient <- function() {
  w$grad <- NULL
  (x * w)$sum()$backward()
  sprintf("%a", as.numeric(w$grad))
}
torch_set_num_threads(1)
one_thread <- sprintf("%a", as.numeric(x$sum()))
invisible(gradient()) # R torch's first backward: the pool thread that runs it takes 1 thread, for good
torch_set_num_threads(2)
two_threads <- sprintf("%a", as.numeric(x$sum()))
got <- replicate(60, gradient())
cat(sprintf("forward sum: 1 thread %s, 2 threads %s\n", one_thread, two_threads))
cat(sprintf("R torch, 60 backward passes after torch_set_num_threads(2): %d gave the 2-thread sum, %d the 1-thread sum\n",
            sum(got == two_threads), sum(got == one_thread)))
if (any(got != two_threads)) { cat("BUG: backward ran on a pool thread that kept an older thread count\n"); quit(status = 1) }
cat("fixed: every backward ran on the thread count set\n")
