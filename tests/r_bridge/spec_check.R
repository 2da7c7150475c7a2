#' A stand-in R script for the bridge tests: checks the bridge's `parse_run_spec()` (r_scripts/_bridge.R), which parses a
#' run spec field by field and keeps each field's value, against `jsonlite::fromJSON()` of the whole spec. Needs no torch.
#'
#' `spec$batch` is JSON text: a list of run specs, each an object of its fields' JSON texts, as the worker sends them. Each
#' is parsed through `parse_run_spec()` and compared, identical(), with the whole spec (its fields joined into one object)
#' parsed at once: all of them, all again (every field kept), then `spec$fresh` specs like the first, each with a weights
#' path of its own (as every record call has: past the cache's bound it starts again), then all once more. `given`: whether
#' the spec this call got, its own fields but `batch` and `fresh`, is the whole of them parsed at once.

run_workload <- function(spec, mode) {
  whole <- function(fields) {
    jsonlite::fromJSON(paste0("{", paste0('"', names(fields), '":', fields, collapse = ","), "}"), simplifyVector = TRUE)
  }
  batch <- lapply(jsonlite::fromJSON(spec$batch, simplifyVector = FALSE), unlist)
  wholes <- lapply(batch, whole)
  paths <- sprintf("/tmp/w%d.safetensors", seq_len(spec$fresh))
  fresh <- lapply(paths, function(path) replace(batch[[1L]], "weights_out", paste0('"', path, '"')))
  fresh_wholes <- lapply(paths, function(path) replace(wholes[[1L]], "weights_out", list(path)))
  checked <- mapply(function(fields, expected) identical(parse_run_spec(fields), expected),
                    c(batch, batch, fresh, batch), c(wholes, wholes, fresh_wholes, wholes))
  own <- spec[setdiff(names(spec), c("own", "batch", "fresh"))]
  list(same = sum(checked), checked = length(checked), given = identical(own, jsonlite::fromJSON(spec$own, simplifyVector = TRUE)))
}
