#' The harness's entry point into R: what `harness/worker_side/r_handler.py` sources in its rpy2 worker.
#'
#' It loads the shared files (run_spec.R ... patches.R) from the folder the harness names in `amp_parity_r_dir` and defines `amp_parity_call()`,
#' which the worker calls for every cell with the script's path, the run spec's fields as JSON and the mode. Only plain data
#' crosses: the spec comes in as JSON text, a text per top-level field (`parse_run_spec()`), and the record goes back as JSON
#' text, the line the script prints in
#' shell mode. No Python twin: the Python worker imports the scripts (harness/worker_side/python_handler.py). It also defines
#' `amp_parity_calibrate()`, the loop that measures the machine's noise floor, whose twin is harness/worker_side/calibration.py,
#' and the three functions the worker calls them through (`amp_parity_reply_*()`). The worker loads this file, and it loads
#' the others, byte-compiled (_bytecode.R).

# Run on its own (`Rscript r_scripts/_bridge.R`), there is nothing to source it from: say so in one line.
if (sys.nframe() == 0L) {
  message("error: r_scripts/_bridge.R is the harness's entry point into R, sourced by its rpy2 worker; it runs nothing on its own. Run a script: Rscript r_scripts/with_autocast.R --help")
  quit(save = "no", status = 4L) # harness.errors.ExitCode.USAGE_ERROR: run the wrong file
}

# The harness knows where the scripts are: its R worker (harness/worker_side/r_handler.py) sets `amp_parity_r_dir`
# to this file's folder before sourcing it, so the bridge never finds itself (files run by hand use r_file_path()).
if (!is.character(get0("amp_parity_r_dir"))) {
  cli::cli_abort(c(
    "{.var amp_parity_r_dir} must name the folder holding the R scripts before {.file _bridge.R} is sourced.",
    i = "The harness's R worker sets it (harness/worker_side/r_handler.py); by hand: {.code amp_parity_r_dir <- \"r_scripts\"}."
  ))
}
# Our files byte-compiled, from the cache the worker names in `amp_parity_bytecode_dir` (_bytecode.R says why). The worker
# has loaded _bytecode.R already, to load this file with it.
if (!exists("source_compiled", mode = "function")) {
  source(file.path(amp_parity_r_dir, "_bytecode.R"), local = environment())
}
# The shared files by job, in the order they load (_bootstrap.R's list, shell.R aside).
for (part in c("run_spec.R", "model.R", "tracing.R", "timing.R", "record.R", "optimizer.R", "scaler.R", "features.R", "checkpoint.R",
    "loop.R", "patches.R")) {
  source_compiled(file.path(amp_parity_r_dir, part), environment())
}

# The worker is the harness's process: an error's message is a cell's one-line reason, so cli must not wrap it.
options(cli.width = 10000L)

#' Scripts the bridge has sourced, by path, each with the mtime it had then.
sourced_scripts <- new.env(parent = emptyenv())

#' Run-spec fields the bridge has parsed, by their JSON text (`json`, and `value` at the same place): see `parse_run_spec()`.
parsed_fields <- new.env(parent = emptyenv())
parsed_fields$json <- character()
parsed_fields$value <- list()
#' At most this many parsed fields are kept; past it the cache starts again. The main job's run specs have about 30 fields,
#' and most are the same for every cell of a run (the modes, dtypes, record fields, patches, model): a few hundred distinct
#' texts over its 680 cells, so a kept worker finds them all, while the one field unique to each record call (its weights
#' path) cannot grow the cache without bound. A lookup is one `match()` over at most this many strings.
PARSED_FIELDS_MAX <- 1024L

#' The run spec from its fields' JSON texts (`fields`: a named character vector, a text per top-level field, in the spec's
#' order), as `jsonlite::fromJSON(<the whole spec>, simplifyVector = TRUE)` would give it: fromJSON simplifies each field on
#' its own, so parsing them one by one gives the same list (tests/integration/test_r_worker.py checks every run spec of the
#' main job, identical()). Each text is parsed once per worker and kept: parsing the whole spec (3-5 kB) took 1-2.7 ms of a
#' call's bridge in a worker (0.5-0.7 ms in a loop of parses alone), most of R's bridge; the fields that change from cell to
#' cell are a few short ones. R copies on modify, so a script cannot change a kept value.
parse_run_spec <- function(fields) {
  at <- match(fields, parsed_fields$json)
  fresh <- unique(fields[is.na(at)])
  if (length(fresh) > 0L) {
    if (length(parsed_fields$json) + length(fresh) > PARSED_FIELDS_MAX) { # start again: every field of this spec is fresh
      parsed_fields$json <- character()
      parsed_fields$value <- list()
      fresh <- unique(fields)
    }
    # lapply keeps a field whose JSON is null as a NULL element, as fromJSON of the whole spec does
    parsed_fields$value <- c(parsed_fields$value, lapply(unname(fresh), jsonlite::fromJSON, simplifyVector = TRUE))
    parsed_fields$json <- c(parsed_fields$json, fresh)
    at <- match(fields, parsed_fields$json)
  }
  stats::setNames(parsed_fields$value[at], names(fields))
}

#' What the harness's rpy2 worker calls: run one mode of one script and return its record as JSON.
#'
#' The script is sourced into a fresh environment whose parent holds these functions, so it sees
#' the shared files without sourcing them again. That environment is kept for the next call until the file
#' changes: a script defines functions only, and sourcing it anew would add its parse time to
#' every timed round's bridge overhead. R errors propagate unchanged: the worker keeps R's own message.
amp_parity_call <- function(script_path, spec_fields, mode, spec = parse_run_spec(spec_fields)) {
  if (!file.exists(script_path)) {
    abort_cli("R script {.path {script_path}} does not exist.")
  }
  mtime <- file.mtime(script_path) # a POSIXct with sub-second digits; a tenth of file.info() and format()
  cached <- get0(script_path, envir = sourced_scripts, inherits = FALSE)
  if (is.null(cached) || !identical(cached$mtime, mtime)) {
    script_env <- new.env(parent = environment(sys.function()))
    source_compiled(script_path, script_env)
    cached <- list(env = script_env, mtime = mtime)
    assign(script_path, cached, envir = sourced_scripts)
  }
  run_workload <- get0("run_workload", envir = cached$env, mode = "function", inherits = FALSE)
  if (is.null(run_workload)) {
    abort_cli("{.path {script_path}} does not define {.fn run_workload}.")
  }
  record_to_json(run_workload(spec, mode))
}

#' What the harness's rpy2 worker calls to trace a cell: `amp_parity_call()` with every `trace_point()` handed over.
#'
#' Each point goes to the worker's recorder (a Python function, harness/worker_side/trace_recorder.py), which digests its
#' bytes: both languages' points are digested by the same code. They go a step at a time: the points of one step are
#' collected here (their bytes, step, name, dtype and shape) and handed over together, when the next step's first point
#' arrives or the run ends, in one call of `record_points(steps, names, dtypes, ranks, sizes, lengths, bytes)`, because a call into
#' Python costs about as much as everything else a point costs in R. A step's bytes are bounded by the workload's size (a
#' recipe step is at most a few hundred megabytes of activations and gradients). It answers what to do next. `"done"`:
#' the recorder has every point it was asked to keep (the narrow second pass), and the run stops there (a condition of
#' class `amp_parity_trace_done`; `with_autocast()` restores its state on the way out): the record is then `"null"`.
#' `c("cut", names)`: the run parted in that step from the run the harness compares it with (the recorder's `against`),
#' and from now on only the points named are traced (`cut_trace()` in tracing.R): the others are dropped before their
#' values are even gathered, where a kept point costs a copy, its dtype, its shape and its bytes (issue 38). `"go"`: go on.
#'
#' The tensor's bytes come from R torch's `buffer_from_torch_tensor()` (a raw vector, what safetensors
#' writes), of a fresh copy: that function copies from the start of the tensor's storage and ignores a
#' view's storage offset (lantern's `_lantern_buffer_from_tensor`, src/lantern/src/Tensor.cpp at
#' mlverse/torch e4de110), so for `data[i, , ]` with `i > 1` it would return the first batch's bytes
#' (tests/integration/test_r_worker.py keeps a test of it).
amp_parity_trace_call <- function(script_path, spec_fields, mode, record_points) {
  run_spec <- parse_run_spec(spec_fields)
  on_cuda <- identical(run_spec$device, "cuda")
  # The contract's dtype names by libtorch's (what dtype_name() reads of the run spec), looked up once per point.
  contract_names <- vapply(run_spec$dtypes, function(d) d$libtorch, character(1))
  contract_names <- stats::setNames(names(contract_names), contract_names)
  if (!all(c("float64", "int64") %in% names(run_spec$dtypes))) { # what number_point() names its points' dtypes
    abort_cli("The run spec's dtype table lacks float64 or int64, which R numbers are traced as: update harness/contract/dtypes.py.")
  }
  contiguous <- torch::torch_contiguous_format()
  batch <- new.env(parent = emptyenv())
  empty <- function() {
    batch$n <- 0L
    batch$steps <- integer(64L)
    batch$names <- character(64L)
    batch$dtypes <- character(64L)
    batch$shapes <- vector("list", 64L)
    batch$bytes <- vector("list", 64L)
  }
  flush <- function() {
    if (batch$n == 0L) {
      return(invisible(NULL))
    }
    k <- seq_len(batch$n)
    # Every field in one R vector, which Python reads whole, where a list of vectors or a character vector is read
    # element by element (a wrapper per element: most of what the Python side cost): the names and the dtypes as one
    # string each, a line per point (no name has a newline); the shapes flattened (each point's rank, then every size);
    # the bytes end to end (each point's length, then one raw vector: unlist() copies them at memory speed).
    shapes <- batch$shapes[k]
    bytes <- batch$bytes[k]
    answer <- record_points(batch$steps[k], paste(batch$names[k], collapse = "\n"), paste(batch$dtypes[k], collapse = "\n"),
                            lengths(shapes), as.integer(unlist(shapes)), lengths(bytes), unlist(bytes))
    empty()
    if (identical(answer[[1L]], "done")) {
      stop(errorCondition("the trace has every point it was asked to keep", class = "amp_parity_trace_done"))
    }
    if (identical(answer[[1L]], "cut")) {
      cut_trace(answer[-1L]) # tracing.R: trace_point() drops the other points from now on
    }
  }
  empty()
  set_trace_sink(function(step, name, value) {
    if (batch$n > 0L && batch$steps[[batch$n]] != step) flush()
    # A contiguous copy with storage of its own (offset 0, see above), in as few calls as can be: each R torch
    # method call costs tens of microseconds, paid at every point (the copy may carry autograd history: unused).
    # The exported functions' own calls, without their wrappers: the wrappers were most of a point's cost (issue 38:
    # `torch_clone()` 34 us against 12 us; `$dtype`, an R7 lookup and an R6 object, 14-21 us against 7 us), at about
    # 1,600 points a `tiny` clip call. `torch_clone()` and `as.character(x$dtype)` call exactly these.
    number <- inherits(value, "amp_parity_number") # an R number (number_point() in tracing.R): its bytes are written here
    if (!number) {
      if (on_cuda) value <- value$cpu()
      value <- torch:::cpp_torch_namespace_clone_self_Tensor(value, contiguous)
    }
    n <- batch$n + 1L
    if (n > length(batch$steps)) {
      size <- 2L * length(batch$steps)
      length(batch$steps) <- size
      length(batch$names) <- size
      length(batch$dtypes) <- size
      length(batch$shapes) <- size
      length(batch$bytes) <- size
    }
    batch$steps[[n]] <- step
    batch$names[[n]] <- name
    if (number) {
      batch$dtypes[[n]] <- value$dtype # "float64" or "int64", the contract's names (checked at the call's start)
      batch$shapes[[n]] <- integer(0)
      batch$bytes[[n]] <- number_bytes(value)
    } else {
      dtype <- torch:::cpp_torch_tensor_dtype(value)
      oldClass(dtype) <- "torch_dtype" # what cpp_dtype_to_string() checks; structure() costs twice this (6 us a point)
      contract_name <- contract_names[torch:::cpp_dtype_to_string(dtype)]
      batch$dtypes[[n]] <- if (is.na(contract_name)) dtype_name(value$dtype, list(dtypes = run_spec$dtypes)) else contract_name # dtype_name(): its error
      # cpp_tensor_dim() is what `value$shape` and dim() return (integer(0) for a 0-d tensor) at a fraction of their cost
      # (2 us against 6 and 13-18 us): `$shape` goes through the tensor's R7 `$` and `size()` first.
      batch$shapes[[n]] <- torch:::cpp_tensor_dim(value)
      batch$bytes[[n]] <- torch:::cpp_buffer_from_tensor(value)
    }
    batch$n <- n
  })
  on.exit(set_trace_sink(NULL), add = TRUE)
  tryCatch(
    {
      record <- amp_parity_call(script_path, spec_fields, mode, run_spec)
      flush()
      record
    },
    amp_parity_trace_done = function(cond) "null"
  )
}

#' One optimizer step of a 1x1 model, once, when the worker starts (its describe call): the twin of `_first_step()` in
#' harness/worker_side/python_handler.py.
#'
#' A process's first optimizer step pays one-time costs (R's JIT compiling the package code it runs, withr's, R6's and
#' R torch's optimizer closures: about 0.15 s here; Python's lazy imports); paid here, they are part of making the
#' worker ready to run a cell, not of the first cell's record call, where they were charged to that cell.
amp_parity_first_step <- function() {
  model <- torch::nn_linear(1L, 1L)
  optimizer <- torch::optim_sgd(model$parameters, lr = 0)
  model(torch::torch_ones(1L, 1L))$sum()$backward()
  optimizer$step()
  invisible(NULL)
}

#' The intra-op thread counts a backward pass really runs on: the twin of `backward_threads()` in
#' harness/worker_side/thread_probe.py (same names, same order; that file says why the probe is what it is).
#'
#' R torch runs each backward on a thread of its own pool (src/autograd.cpp), which takes its thread count at its first
#' parallel op and keeps it: the worker calls this after it has set the run's threads, and stores the answer with each cell.
#' Returns `list(intra_op_threads, interop_threads, backward_threads)`, the last the counts whose reference sums the
#' backward passes matched (sorted; empty where none did). The worker passes `n`, `max_threads` and `calls`.
amp_parity_backward_threads <- function(n, max_threads, calls) {
  previous <- torch::torch_get_num_threads()
  positions <- torch::torch_arange(0, n - 1, dtype = torch::torch_float32())
  u <- positions$sin()
  v <- (positions * 0.5)$sin()
  key <- function(a, b) paste(sprintf("%a", as.numeric(a)), sprintf("%a", as.numeric(b)))
  counts_by_sums <- list()
  local({
    on.exit(torch::torch_set_num_threads(previous), add = TRUE)
    for (k in seq_len(max_threads)) {
      torch::torch_set_num_threads(k)
      sums <- key(u$sum(), v$sum())
      counts_by_sums[[sums]] <<- c(counts_by_sums[[sums]], k)
    }
  })
  w1 <- torch::torch_tensor(1, requires_grad = TRUE) # shape [1] (R torch has no 0-d torch_ones): the same full sum
  w2 <- torch::torch_tensor(1, requires_grad = TRUE)
  seen <- integer(0)
  for (i in seq_len(calls)) {
    w1$grad <- NULL
    w2$grad <- NULL
    ((u * w1)$sum() + (v * w2)$sum())$backward()
    seen <- union(seen, counts_by_sums[[key(w1$grad, w2$grad)]])
  }
  list(intra_op_threads = torch::torch_get_num_threads(), interop_threads = torch::torch_get_num_interop_threads(),
       backward_threads = sort(as.integer(seen)))
}

#' What the harness's rpy2 worker calls to measure the machine's noise floor: the twin of `calibrate()` in
#' harness/worker_side/calibration.py (same names, same order; that file says why the loop is what it is).
#'
#' `iterations` bare training steps of a fixed MLP (`num_layers` linear layers, `in_size` wide but the last, ReLU between)
#' with `batch_size` rows, under autocast in `dtype` (off for float32) on `device` with `threads` threads, timed by `clock()`
#' (the clock a script's `seconds_total` reads) around the loop only; returns `c(seconds, iterations)`. Plain weight
#' tensors, every one `1/fan_in` everywhere, and an input of ones: the same work every step. A step is the forward, the sum
#' of squares in float32 as the loss, its backward, and each weight updated in place by `lr` times its gradient, the
#' gradient then dropped. No `nn_module`, no optimizer, no scaler: none of R torch's R code beyond the tensor ops (and
#' `nnf_linear()`, R torch's one-line call of `torch_linear()`, which it does not export). The worker
#' checks the request and passes `lr` (`FLOOR_LR`, kept in that file). R's collector cannot be switched off as Python's is:
#' a minor collection first (`pause_gc()`), as a script does before its loop.
amp_parity_calibrate <- function(device, dtype, threads, iterations, batch_size, in_size, out_size, num_layers, lr) {
  previous_threads <- torch::torch_get_num_threads()
  on.exit(torch::torch_set_num_threads(previous_threads), add = TRUE)
  torch::torch_set_num_threads(threads)
  widths <- c(rep(in_size, num_layers), out_size)
  weights <- lapply(seq_len(num_layers), function(k) {
    torch::torch_full(c(widths[k + 1], widths[k]), 1 / widths[k], device = device, requires_grad = TRUE)
  })
  inputs <- torch::torch_ones(batch_size, in_size, device = device)
  step <- function() {
    torch::with_autocast(device_type = device, dtype = torch_dtype(dtype), enabled = dtype != "float32", {
      hidden <- inputs
      for (k in seq_len(num_layers)) {
        hidden <- torch::nnf_linear(hidden, weights[[k]])
        if (k < num_layers) {
          hidden <- torch::torch_relu(hidden)
        }
      }
      loss <- hidden$to(dtype = torch::torch_float())$pow(2)$sum()
    })
    loss$backward()
    torch::with_no_grad({
      for (weight in weights) {
        weight$sub_(weight$grad, alpha = lr)
        weight$grad <- NULL
      }
    })
  }
  step()
  pause_gc(list(collect_before_loop = "young")) # what the step before the clock left is freed before the loop
  sync_device(device)
  start <- clock()
  for (i in seq_len(iterations)) {
    step()
  }
  sync_device(device)
  seconds <- clock() - start
  c(seconds, iterations)
}

#' The same for the noise-floor loop (`amp_parity_calibrate()`): `c("ok", seconds, iterations)` as text, the seconds with
#' every digit a double holds.
amp_parity_reply_calibrate <- function(device, dtype, threads, iterations, batch_size, in_size, out_size, num_layers, lr) {
  tryCatch(
    c("ok", sprintf("%.17g", amp_parity_calibrate(device, dtype, threads, iterations, batch_size, in_size, out_size, num_layers, lr))),
    error = function(e) c("error", paste(conditionMessage(e), collapse = "\n"))
  )
}

#' What the harness's rpy2 worker calls (harness/worker_side/r_handler.py): `amp_parity_call()`, its reply one character
#' vector `c(kind, text)`: `c("ok", record)`, or an R error as R's own condition message (`"refused"`: the script refused
#' the cell, a condition of class `amp_parity_refused`; `"error"`), not rpy2's summary of it. One vector, because rpy2
#' converts it in one step, where a named list costs a conversion per name and per element (0.15 ms of every call's bridge).
#' Defined here rather than by the worker, so that it is byte-compiled with this file: the JIT would compile it in a
#' timed round (R compiles a small function at its second call).
amp_parity_reply_call <- function(script_path, spec_fields, mode) {
  tryCatch(
    c("ok", amp_parity_call(script_path, spec_fields, mode)),
    amp_parity_refused = function(e) c("refused", paste(conditionMessage(e), collapse = "\n")),
    error = function(e) c("error", paste(conditionMessage(e), collapse = "\n"))
  )
}

#' The same for a traced call (`amp_parity_trace_call()`), whose points go to `record_points`.
amp_parity_reply_trace_call <- function(script_path, spec_fields, mode, record_points) {
  tryCatch(
    c("ok", amp_parity_trace_call(script_path, spec_fields, mode, record_points)),
    amp_parity_refused = function(e) c("refused", paste(conditionMessage(e), collapse = "\n")),
    error = function(e) c("error", paste(conditionMessage(e), collapse = "\n"))
  )
}

