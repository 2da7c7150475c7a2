#' The run spec's model: built from its file in models/, its parameters named as the contract names them. The twin of
#' `py_scripts/model.py`.
#'
#' A model is a row of harness/contract/models.py, which the run spec hands over (`model`: its name, its layers, each
#' parameter's name and layer in the optimizer's order), and a file `r_scripts/models/<name>.R` defining its `build()` and
#' `forward()`. Everything else asks here: the parameters by name (the fixtures', the final weights', the trace's), and
#' by layer (what a loop feature indexes: a frozen layer, two optimizers split by layer).

#' The model of the call in progress (`_model_state` in model.py): its file's functions, its parameters' names and each
#' one's layer, in the optimizer's order (the run spec's `model`). Set by `make_model()`.
model_state <- new.env(parent = emptyenv())

#' R-only (Python imports a model's module once): each model file's functions, sourced once per process into an
#' environment of their own (two models' `build()` must not meet), by the file's path.
model_files <- new.env(parent = emptyenv())

#' R-only: the functions of `r_scripts/models/<name>.R` (in the folder the scripts were loaded from), byte-compiled
#' where the bridge loaded our files so (`source_compiled()`, _bytecode.R).
model_functions <- function(name) {
  path <- file.path(amp_parity_r_dir, "models", paste0(name, ".R"))
  functions <- get0(path, envir = model_files, inherits = FALSE)
  if (is.null(functions)) {
    if (!file.exists(path)) {
      abort_cli("Model {.val {name}} has no forward in R: {.path {path}} does not exist.")
    }
    functions <- new.env(parent = environment(make_model))
    if (exists("source_compiled", mode = "function")) source_compiled(path, functions) else sys.source(path, envir = functions)
    assign(path, functions, envir = model_files)
  }
  functions
}

#' The run spec's model, built by its file's `build()` with its parameters copied from the fixtures; a file that builds
#' other parameters than the contract declares (their count or a shape) is refused.
make_model <- function(spec, fixtures) {
  row <- spec$model
  functions <- model_functions(if (is.null(row$files)) row$name else row$files) # a variant runs its row's forward
  net <- functions$build(spec)
  names <- as.character(unlist(row$parameters))
  params <- in_contract_order(net, names)
  same <- length(params) == length(names) && all(vapply(seq_along(params), function(k) {
    identical(params[[k]]$shape, fixtures[[names[[k]]]]$shape)
  }, NA))
  if (!same) {
    abort_cli("Model {.val {row$name}}: r_scripts/models/{row$name}.R builds other parameters than harness/contract/models.py declares ({names}).")
  }
  torch::with_no_grad({
    for (k in seq_along(params)) params[[k]]$copy_(fixtures[[names[[k]]]])
  })
  model_state$functions <- functions
  model_state$names <- names
  model_state$layers <- as.integer(unlist(row$parameter_layers))
  model_state$dims <- if (is.null(row$dims)) list() else row$dims
  net
}

#' The module's parameters in the contract's order: by name where the module names them as the contract does (R torch
#' may register them in another order: its multi-head attention puts `out_proj` before `in_proj_weight`), else in the
#' module's own order (the MLP's `nn_sequential()` names them `0.weight`, ...).
in_contract_order <- function(net, names) {
  params <- net$parameters
  if (all(names %in% names(params))) params[names] else params
}

#' The model's own forward (its file's `forward()`), each intermediate a trace point; `unused`: a layer (0-based) left
#' out this step (loop feature `sometimes_used`; -1: none); `custom`: a layer computed by a function of the input and
#' that layer (loop feature `custom_function`), as `list(layer, fn)`.
forward <- function(net, x, step, unused = -1L, custom = NULL) {
  model_state$functions$forward(net, x, step, unused, custom)
}

#' The model's loss of a batch: its file's `loss()` where it has one (a classifier's cross-entropy, given the model's
#' `dims`: a variant's options), else `default` (the loop's MSE).
model_loss <- function(output, target, default) {
  own <- model_state$functions$loss
  if (!is.null(own)) own(output, target, model_state$dims) else default(output, target)
}

#' Every parameter with the name the fixtures, the final weights and the trace give it (`layer0.weight`, ...), in the
#' order the optimizer steps them (`net$parameters`', the contract's), as a named list.
named_parameters <- function(net) {
  params <- in_contract_order(net, model_state$names)
  names(params) <- model_state$names
  params
}

#' The parameters of `layers` (0-based, as the contract numbers a model's layers), in the optimizer's order, as a named
#' list.
layer_parameters <- function(net, layers) {
  params <- named_parameters(net)
  params[model_state$layers %in% layers]
}
