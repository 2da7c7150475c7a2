#' Every nn_init case in R torch: the twin of `py_scripts/nn_init.py` (same names, same order).
#'
#' `Rscript r_scripts/nn_init.R CASES_JSON OUT_SAFETENSORS`: reads the cases (harness/contract/nn_init.py, written by
#' `python -m harness inits`), runs each after the same manual seed on a fresh `torch_empty()` tensor of its shape and
#' dtype, and writes the initialised tensors under the cases' ids; a case the binding refuses is written as its error, in
#' its own words, in the file's metadata (`errors`: a JSON object by case id), with the binding's versions (`versions`).
#' `calculate_gain` returns a number: written as a one-element float64 tensor. Needs only torch, safetensors and jsonlite
#' (none of the shared files: nothing of the training workload is used).

#' R torch's `nn_init_<name>()`.
init_function <- function(name) {
  get(paste0("nn_init_", name), envir = asNamespace("torch"), mode = "function")
}

#' One case's result: the tensor it initialised (a number as a one-element float64 tensor). Stops with R torch's error.
run_case <- function(case, seed) {
  torch::torch_manual_seed(seed)
  fn <- init_function(case[["function"]])
  if (is.null(case$shape)) {
    return(torch::torch_tensor(do.call(fn, case$options), dtype = torch::torch_float64()))
  }
  # JSON's whole numbers arrive as R integers: R torch takes both for every option here (groups is one).
  tensor <- torch::torch_empty(as.integer(unlist(case$shape)), dtype = get(paste0("torch_", case$dtype), envir = asNamespace("torch"))())
  do.call(fn, c(list(tensor), case$options))
  tensor
}

#' The error's first line, as the binding wrote it.
error_text <- function(err) {
  lines <- strsplit(trimws(conditionMessage(err)), "\n", fixed = TRUE)[[1]]
  if (length(lines) == 0L) class(err)[[1]] else lines[[1]]
}

#' Run every case of `cases_path` and write the results and errors to `out_path`.
write_init_cases <- function(cases_path, out_path) {
  declared <- jsonlite::fromJSON(cases_path, simplifyVector = FALSE)
  tensors <- list()
  errors <- list()
  for (case in declared$cases) {
    result <- tryCatch(run_case(case, declared$seed), error = function(err) err)
    if (inherits(result, "error")) {
      errors[[case$id]] <- error_text(result)
    } else {
      tensors[[case$id]] <- result$contiguous()
    }
  }
  versions <- list(binding = paste("R torch", as.character(utils::packageVersion("torch"))),
                   libtorch = as.character(get0("torch_version", envir = asNamespace("torch"), inherits = FALSE)))
  safetensors::safe_save_file(tensors, out_path, metadata = list(
    errors = as.character(jsonlite::toJSON(if (length(errors)) errors else structure(list(), names = character(0)), auto_unbox = TRUE)),
    versions = as.character(jsonlite::toJSON(versions, auto_unbox = TRUE))
  ))
}

if (sys.nframe() == 0L) {
  args <- commandArgs(trailingOnly = TRUE)
  write_init_cases(args[[1]], args[[2]])
}
