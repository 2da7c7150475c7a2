#' What a call leaves behind: its final weights and its run record. The twin of `py_scripts/record.py`.

#' The trained weights, named like the fixtures, as a CPU float32 safetensors file; nothing when `path` is `NULL`.
#'
#' float32 whatever the weights' dtype: a bfloat16 or float16 weight (the lowp_weights modes) is exactly a float32, and
#' NumPy, which judges the weights, has no bfloat16. The harness passes no path in timed rounds after the first call:
#' their weights equal the first's.
save_final_weights <- function(net, path) {
  if (is.null(path)) {
    return(invisible(NULL))
  }
  tensors <- lapply(named_parameters(net), function(param) param$detach()$to(device = "cpu", dtype = torch::torch_float32())$contiguous())
  dir.create(dirname(path), recursive = TRUE, showWarnings = FALSE)
  # writeBin() only warns when the disk is full, and leaves a truncated file that passes for weights.
  withCallingHandlers(
    safetensors::safe_save_file(tensors, path),
    warning = function(w) {
      unlink(path)
      abort_cli("Could not write the final weights to {.path {path}}: {conditionMessage(w)}.")
    }
  )
  invisible(path)
}

#' The run record with exactly the run spec's `record_fields` (harness/contract/record.py, the one list both languages
#' read); a missing or extra field is a script bug. A field of a list kind (`list of ...`) is marked `I()` (as is), so
#' `record_to_json()` keeps it a JSON array with one element or none (Python's JSON knows a list).
#'
#' `schema_version` (the run spec's `record_schema_version`), `frontend`, `torch_version`, `libtorch_version`,
#' `language_version` and `clock` are filled in unless given. A `NULL` field is kept (it becomes JSON null).
#' `seconds_workload` is stamped last, from `workload_start` (the first line of `run_workload`), so building the record
#' is the script's own cost: what the harness calls its bridge starts after it.
make_record <- function(spec, workload_start, ...) {
  fields <- list(...)
  static <- c(static_fields(), list(schema_version = spec$record_schema_version))
  for (name in setdiff(names(static), names(fields))) {
    fields[name] <- list(static[[name]])
  }
  fields$seconds_workload <- clock() - workload_start
  record_fields <- names(spec$record_fields)
  missing <- setdiff(record_fields, names(fields))
  extra <- setdiff(names(fields), record_fields)
  if (length(missing) > 0L || length(extra) > 0L || anyDuplicated(names(fields)) > 0L) {
    abort_cli(c(
      "The run record's fields differ from the contract.",
      x = "Missing: {.val {missing}}; extra or repeated: {.val {c(extra, names(fields)[duplicated(names(fields))])}}."
    ))
  }
  record <- fields[record_fields]
  for (name in record_fields[startsWith(unlist(spec$record_fields, use.names = FALSE), "list of ")]) {
    if (!is.null(record[[name]])) record[[name]] <- I(record[[name]])
  }
  record
}

#' The record fields that are the same for every call of a process, looked up once: the version strings
#' (`packageVersion()` alone costs most of a millisecond, which a timed round would pay after its clock).
static_fields <- local({
  cached <- NULL
  function() {
    if (is.null(cached)) {
      cached <<- list(
        frontend = "r",
        torch_version = as.character(utils::packageVersion("torch")),
        libtorch_version = libtorch_version(), language_version = R.version.string, clock = clock_name
      )
    }
    cached
  }
})

#' R-only: the libtorch version R torch runs on, or `NULL` where the installed torch does not say.
#'
#' R torch keeps it as the internal string `torch_version` in R/install.R (e.g. "2.8.0"): the
#' libtorch that `install_torch()` downloads and lantern is built against. It is not exported, so
#' it is read from the namespace. A `TORCH_URL` install of another libtorch is not reflected.
libtorch_version <- function() {
  version <- get0("torch_version", envir = asNamespace("torch"), inherits = FALSE)
  if (is.character(version) && length(version) == 1L) version else NULL
}

#' `cpu` or the CUDA device's name.
#'
#' R torch has no device-name call (R/cuda.R: capability, count, memory stats only), so the name
#' comes from `nvidia-smi` for the current device (honouring `CUDA_VISIBLE_DEVICES`); `"cuda"` if
#' that fails.
device_name <- function(device) {
  if (device != "cuda") {
    return("cpu")
  }
  index <- torch::cuda_current_device()
  visible <- trimws(strsplit(Sys.getenv("CUDA_VISIBLE_DEVICES"), ",", fixed = TRUE)[[1]])
  id <- if (length(visible) > index) visible[[index + 1L]] else as.character(index)
  name <- tryCatch(
    suppressWarnings(system2(
      "nvidia-smi", c("--query-gpu=name", "--format=csv,noheader", paste0("--id=", shQuote(id))),
      stdout = TRUE, stderr = FALSE
    )),
    error = function(err) character()
  )
  if (length(name) == 1L && is.null(attr(name, "status")) && nzchar(trimws(name))) trimws(name) else "cuda"
}

#' The record as one line of JSON (the shell summary and what the bridge returns).
#'
#' Fields marked `I()` (as is: the list kinds, `make_record()`) stay arrays with one element or none; `NULL` and `NA`
#' become null; NaN and infinities are written
#' as Python's json does (`NaN`, `Infinity`), which jsonlite cannot. Doubles are written with 17
#' significant digits (`exact_json_numbers()`), so Python reads back the very same doubles. Written with
#' vectorised base R rather than `jsonlite::toJSON()` on the whole list, whose method dispatch per field
#' every timed round would pay as bridge overhead (Python's twin is `json.dumps`): the scalar strings and
#' doubles are each written in one call (a call costs tens of microseconds, whatever its length), and a
#' record with the contract's fields reuses their quoted keys (`record_keys_json`).
record_to_json <- function(record) {
  if (!is.list(record) || is.null(names(record))) {
    abort_cli("{.fn run_workload} must return a named list (the run record), not {.cls {class(record)}}.")
  }
  keys <- names(record)
  is_array <- vapply(record, inherits, NA, what = "AsIs", USE.NAMES = FALSE)
  is_scalar <- lengths(record) == 1L & !is_array
  is_string <- is_scalar & vapply(record, is.character, NA, USE.NAMES = FALSE)
  is_number <- is_scalar & vapply(record, is.double, NA, USE.NAMES = FALSE)
  is_null <- vapply(record, is.null, NA, USE.NAMES = FALSE)
  values <- character(length(record))
  values[is_string] <- json_string(unlist(record[is_string], use.names = FALSE))
  values[is_number] <- exact_json_numbers(unlist(record[is_number], use.names = FALSE))
  values[is_null] <- "null"
  for (k in which(!(is_string | is_number | is_null))) {
    values[[k]] <- json_value(record[[k]], is_array = is_array[[k]])
  }
  keys_json <- record_keys_json(keys)
  paste0("{", paste0(keys_json, ":", values, collapse = ","), "}")
}

#' R-only (Python has `json.dumps`): one field's value as JSON text: a number, string or logical, or an
#' array of them; `NULL` is null.
json_value <- function(value, is_array) {
  if (is.null(value)) {
    return("null")
  }
  value <- unlist(value, use.names = FALSE) # a list of numbers (the losses as collected) is a vector
  text <- if (is.double(value)) {
    exact_json_numbers(value)
  } else if (is.logical(value)) {
    ifelse(is.na(value), "null", ifelse(value, "true", "false"))
  } else if (is.integer(value)) {
    ifelse(is.na(value), "null", as.character(value))
  } else {
    json_string(as.character(value))
  }
  if (is_array || length(text) != 1L) paste0("[", paste(text, collapse = ","), "]") else text
}

#' R-only: strings as JSON text (vectorised: a record's keys in one call). Printable ASCII (every name, dtype,
#' version and ordinary path) is quoted by base R's `encodeString()`, which escapes `"` and `\\` exactly
#' as JSON does; any other string goes through jsonlite, which also escapes control characters and keeps
#' UTF-8. `NA` is null.
json_string <- function(x) {
  text <- encodeString(x, quote = "\"")
  other <- !is.na(x) & !grepl("^[ -~]*$", x)
  text[other] <- vapply(x[other], function(one) as.character(jsonlite::toJSON(one, auto_unbox = TRUE)), character(1L))
  text[is.na(x)] <- "null"
  text
}

#' R-only: a record's keys as JSON strings, quoted once per process for each list of keys (a record's keys are the same
#' call after call).
record_keys_json <- local({
  last_keys <- NULL
  last_json <- NULL
  function(keys) {
    if (!identical(keys, last_keys)) {
      last_json <<- json_string(keys)
      last_keys <<- keys
    }
    last_json
  }
})

#' R-only: doubles as JSON text that reads back as the very same doubles.
#'
#' jsonlite writes at most 15 significant digits (even with `digits = NA`), which is not enough for
#' a bitwise comparison with Python's shortest-round-trip floats; `%.17g` always is. NaN and infinities
#' are written as Python's json writes and reads them (`NaN`, `Infinity`, `-Infinity`), so a failure
#' report can say which it was ("loss is NaN at step 3 (r)"); only `NA` (nothing recorded) is `null`.
exact_json_numbers <- function(x) {
  if (all(is.finite(x))) {
    return(sprintf("%.17g", x)) # the usual case, without four passes of ifelse()
  }
  ifelse(is.finite(x), sprintf("%.17g", x),
    ifelse(is.nan(x), "NaN", ifelse(is.na(x), "null", ifelse(x > 0, "Infinity", "-Infinity")))
  )
}
