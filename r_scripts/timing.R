#' The clock, the garbage collector and the device's memory around the timed loop. The twin of `py_scripts/timing.py`.

#' R-only: which clock `clock()` reads, the best installed, checked once without loading bench (Python
#' has one clock, `time.perf_counter`).
#'
#' Base R's only sub-second clock is `proc.time()`'s elapsed time, in milliseconds: a 15 ms loop
#' would read as 15 or 16. Debian's r-cran-bench (installed by .ci/setup) has `bench::hires_time()`:
#' nanoseconds, but from `CLOCK_REALTIME` on Linux (bench's src/nanotime.c), so it is not monotonic:
#' an NTP step during a loop would show in that loop's time (NTP normally slews, which does not).
#' No Debian R package exports a monotonic clock (r-cran-clock and r-cran-nanotime are wall-clock time;
#' microbenchmark, which reads `CLOCK_MONOTONIC`, is not packaged in Debian; it is preferred where it
#' is installed). The double bench returns (~1.8e9 s) resolves 0.24 us.
clock_source <- if (nzchar(system.file(package = "microbenchmark"))) {
  "microbenchmark"
} else if (nzchar(system.file(package = "bench"))) {
  "bench"
} else {
  "proc.time"
}

#' The clock as each record names it (`clock`): the function and what it reads.
clock_name <- c(
  microbenchmark = "microbenchmark::get_nanotime (CLOCK_MONOTONIC)",
  bench = "bench::hires_time (CLOCK_REALTIME)",
  proc.time = "proc.time (elapsed, 1 ms steps)"
)[[clock_source]]

#' Wait for queued device work, so a clock read measures finished work (no-op on CPU).
sync_device <- function(device) {
  if (device == "cuda") {
    torch::cuda_synchronize()
  }
  invisible(NULL)
}

#' A clock in seconds, the best one installed (`clock_name`); the twin of timing.py's monotonic one.
clock <- switch(clock_source,
  microbenchmark = function() microbenchmark::get_nanotime() / 1e9,
  bench = function() as.numeric(bench::hires_time()),
  function() proc.time()[["elapsed"]]
)

#' Collect R's garbage now, before the timed loop; returns R's GC clock (seconds).
#'
#' R cannot switch its collector off as Python's `gc.disable()` does, so the loop may still collect;
#' `gc.time()` (which also switches GC timing on) counts the elapsed seconds R spent collecting, and
#' `resume_gc()` reports those inside the loop rather than hiding them. `spec$collect_before_loop`
#' says how much: `full` frees the previous call's tensors that R had promoted to an older generation
#' (a young collection leaves them held, and the loop then allocates afresh and pays page faults in
#' some rounds: harness.run.prepare.collect_before_loop has the numbers); `young` (at tiny) costs
#' ~2 ms where a full collection costs ~45 ms with R torch loaded.
pause_gc <- function(spec) {
  if (identical(spec$collect_before_loop, "full")) {
    collect_ahead()
  } else {
    gc(verbose = FALSE, full = FALSE)
  }
  gc.time()[[3]]
}

#' R-only (Python's collector is off in the loop): where R's collection counters last escalated (`escalated_at`: R's
#' running count of that level 1 or 2 collection; NULL until one is seen) and how many full collections
#' `collect_ahead()` made since (`full_since`: R does not count them). Kept across calls in this process, as R's own
#' counters are.
gc_counters <- new.env(parent = emptyenv())

#' R-only (Python's `pause_gc()` switches its collector off): collect fully, then make sure the loop's own collections
#' cannot escalate.
#'
#' R escalates its collections by counters (`collect_counts` in R's memory.c): every 21st counted collection (an
#' allocation's, or `gc(full = FALSE)`) collects the middle generation too (level 1), and every sixth of those every
#' generation (level 2, 0.09-0.1 s with R torch's objects alive in a bench loop). A full `gc()` neither counts nor resets
#' them, so the full collection before the loop left them running, and now and then one of the loop's own collections was
#' the full one: R's scaler and clip cells, 1-2 level-0 collections a bench loop, had such a round in each protocol of
#' two `tox -e bench` runs (docs/timing.md). So, where fewer than `gc_loop_room` counted collections are left before the
#' next escalation, young collections are made here until it happens, outside the timed loop: afterwards 20 counted
#' collections are left. How many are left is read from R's own report of each collection (`verbose = TRUE`, kept from
#' the console): "Garbage collection N = ... (level L)". A collection this function cannot see (another package's
#' `gc()`) only makes it escalate sooner than needed.
collect_ahead <- function() {
  report <- character()
  con <- textConnection("report", "w", local = TRUE)
  sink(con, type = "message")
  on.exit({
    sink(type = "message")
    close(con)
  }, add = TRUE)
  collected <- function(full) {
    invisible(gc(verbose = TRUE, full = full))
    said <- gc_reported(report)
    said[[length(said)]]
  }
  full <- collected(TRUE)
  anchor <- gc_counters$escalated_at
  counted <- if (is.null(anchor) || is.na(full$count)) Inf else full$count - anchor - gc_counters$full_since - 1
  gc_counters$full_since <- (if (is.null(gc_counters$full_since)) 0 else gc_counters$full_since) + 1
  if (counted + gc_loop_room < gc_counter_period) {
    return(invisible(NULL))
  }
  for (i in seq_len(gc_counter_period)) {
    young <- collected(FALSE)
    if (!is.na(young$level) && young$level >= 1L) {
      gc_counters$escalated_at <- young$count
      gc_counters$full_since <- 0
      break
    }
  }
  invisible(NULL)
}

#' R-only: the collections R reported in `report` (lines of its `gc(verbose = TRUE)` output), in order, each as its
#' running count and level ("Garbage collection 23 = 20+1+2 (level 1)"); one NA pair where it reported none.
gc_reported <- function(report) {
  text <- paste(report, collapse = " ")
  said <- regmatches(text, gregexpr("Garbage collection [0-9]+ = [0-9+ ]+\\(level [0-9]\\)", text))[[1]]
  if (length(said) == 0L) {
    return(list(list(count = NA_real_, level = NA_integer_)))
  }
  lapply(said, function(one) {
    list(count = as.numeric(sub("^Garbage collection ([0-9]+) = .*$", "\\1", one)),
         level = as.integer(sub("^.*\\(level ([0-9])\\)$", "\\1", one)))
  })
}

#' R-only: R's escalation period, its LEVEL_0_FREQ (20) level-0 collections, then one at level 1 or 2.
gc_counter_period <- 21

#' R-only: counted collections kept free for the loop: R's bench loops make 0-2 (its clip cell, the most), a traced
#' record call more (it is never timed); 5 leaves room for the loop's allocations to vary.
gc_loop_room <- 5

#' The seconds R spent collecting garbage since `pause_gc()` returned `gc_state` (its GC clock).
resume_gc <- function(gc_state) {
  gc.time()[[3]] - gc_state
}

#' Start the device's peak-memory counter afresh, where the frontend can.
#'
#' R torch cannot: R/cuda.R has `cuda_memory_stats()` and `cuda_empty_cache()` but no
#' `reset_peak_memory_stats()`. On CUDA the peak is therefore the worker process's high-water mark
#' since it started, which can include an earlier run in the same worker. A no-op, kept so the
#' scripts read like their Python twins.
reset_peak_memory <- function(device) {
  invisible(NULL)
}

#' Peak bytes allocated by tensors on CUDA; `NULL` (JSON null) on CPU.
#'
#' `cuda_memory_stats()` (R/cuda.R) nests its entries: `allocated_bytes$all$peak` is libtorch's
#' "allocated_bytes.all.peak", what `torch.cuda.max_memory_allocated()` reads.
peak_memory_bytes <- function(device) {
  if (device != "cuda") {
    return(NULL)
  }
  torch::cuda_memory_stats()$allocated_bytes$all$peak
}
