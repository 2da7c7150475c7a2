#' Patches of R torch's own functions for one run: the twin of `py_scripts/patches.py`.
#'
#' The run spec's `patches$r` (harness/workload/patches.py, docs/tracing.md, docs/known-differences.md) name statements
#' of R torch's functions to replace: a *switch* (a known difference's mechanism computed as the other binding does, for
#' the reconciled run) or a *point* (a trace point of a value the function computes inside itself: applied only when the
#' call is traced). Each `old` statement must occur exactly once in the function's body as installed (compared as
#' `deparse()` prints it, searched into nested blocks and the loop function an optimizer hands `step_helper`), so a
#' patch written for one R torch refuses to touch another. Where Python swaps a function in its module for the run,
#' R patches a copy of each function the script calls (`binding_function()`) and the methods of the optimizer the script
#' built (`patch_optimizer()`, and the scaler's and the scheduler's): R torch's functions are found through its locked namespace, its optimizers' methods live
#' on each object. The copy keeps the function's environment, so it runs R torch's own code but for the replaced
#' statements.

#' The switches this run applies (the record's `switches`): a replacement's id names its switch and the points it
#' carries along (`switch+point:name`).
applied_switches <- function(spec) {
  ids <- as.character(unlist(lapply(patch_rows(spec$patches$r), function(patch) if (patch$kind == "switch") strsplit(patch$id, "+", fixed = TRUE)[[1]])))
  ids[!startsWith(ids, "point:")]
}

#' R-only: the run spec's patches as a list of lists (jsonlite reads an array of objects as a data frame).
patch_rows <- function(patches) {
  if (NROW(patches) == 0L) {
    return(list())
  }
  lapply(seq_len(nrow(patches)), function(k) as.list(patches[k, , drop = FALSE]))
}

#' R-only: the patches for `target` this call applies: switches always, points only when traced.
patches_of <- function(spec, target) {
  Filter(function(patch) patch$target == target && (patch$kind == "switch" || tracing()), patch_rows(spec$patches$r))
}

#' R-only: R torch's function `name`, patched as the run spec says (Python swaps it in its module instead).
binding_function <- function(spec, name) {
  fun <- getExportedValue("torch", name)
  patches <- patches_of(spec, name)
  if (length(patches) == 0L) fun else patched_function(fun, patches, name)
}

#' The functions of R torch's namespace that its own modules call (targets `torch:::<name>`: a model's layer reaches
#' them through the namespace, never through the script), replaced there as the run spec patches them, as Python swaps a
#' function in its module (`binding_patches()`); returns the function that puts R torch's own back (idempotent).
patch_namespace <- function(spec) {
  ns <- asNamespace("torch")
  targets <- unique(vapply(patch_rows(spec$patches$r), function(patch) patch$target, ""))
  originals <- list()
  for (target in targets[startsWith(targets, "torch:::") & !grepl("$", targets, fixed = TRUE)]) { # not a module's binding
    patches <- patches_of(spec, target)
    if (length(patches) == 0L) next
    name <- substring(target, nchar("torch:::") + 1L)
    originals[[name]] <- get(name, envir = ns)
    replace_binding(ns, name, patched_function(originals[[name]], patches, target))
  }
  function() {
    for (name in names(originals)) replace_binding(ns, name, originals[[name]])
    originals <<- list()
  }
}

#' R-only: the model `net` (built by `make_model()`) with the active bindings every module inherits from R torch's
#' `nn_Module` (targets `torch:::nn_Module$<binding>`: `parameters`) patched on each of its modules as the run spec
#' says; R6 made each module's binding when the module was built, so the class cannot be patched for it (Python swaps a
#' method on its class). Returns the function that puts R torch's own back (idempotent).
patch_modules <- function(net, spec) {
  prefix <- "torch:::nn_Module$"
  targets <- unique(vapply(patch_rows(spec$patches$r), function(patch) patch$target, ""))
  originals <- list()
  for (target in targets[startsWith(targets, prefix)]) {
    patches <- patches_of(spec, target)
    if (length(patches) == 0L) next
    name <- substring(target, nchar(prefix) + 1L)
    patched <- patched_function(asNamespace("torch")$nn_Module$active[[name]], patches, target)
    for (module in net$modules) {
      object <- attr(module, "module")
      original <- activeBindingFunction(name, object)
      own <- patched
      environment(own) <- environment(original) # this module's self and private
      replace_active_binding(object, name, own)
      originals[[length(originals) + 1L]] <- list(object = object, name = name, fun = original)
    }
  }
  function() {
    for (kept in rev(originals)) replace_active_binding(kept$object, kept$name, kept$fun)
    originals <<- list()
  }
}

#' R-only: the active binding `name` of `object` made anew from `fun`.
replace_active_binding <- function(object, name, fun) {
  locked <- bindingIsLocked(name, object)
  if (locked) unlockBinding(name, object)
  rm(list = name, envir = object)
  makeActiveBinding(name, fun, object)
  if (locked) lockBinding(name, object)
}

#' R-only: `name` in the locked environment `env` bound to `value` (a namespace's bindings are locked; R's own
#' `assignInNamespace()` does the same).
replace_binding <- function(env, name, value) {
  unlockBinding(name, env)
  assign(name, value, envir = env)
  lockBinding(name, env)
}

#' R-only: the optimizer `opt` (built by `make_optimizer()`) with its methods patched as the run spec says: patches
#' whose target is `<its R function>$<method>`. R6 locks an object's method bindings; this object's are replaced, R
#' torch's class is not.
patch_optimizer <- function(opt, spec) {
  patch_methods(opt, paste0(spec$optimizer$r[["function"]], "$"), spec)
}

#' R-only: the gradient scaler `scaler` (built by `make_grad_scaler()`) with its methods patched as the run spec says:
#' patches whose target is `cuda_amp_grad_scaler$<method>`. Python swaps PyTorch's functions in their modules instead.
patch_scaler <- function(scaler, spec) {
  patch_methods(scaler, "cuda_amp_grad_scaler$", spec)
}

#' R-only: the learning-rate scheduler `scheduler` (built by `make_scheduler()`; `NULL`, the loop without one, as it is)
#' with its methods patched as the run spec says: patches whose target is `<its R function>$<method>`
#' (`lr_reduce_on_plateau$step`). Python swaps PyTorch's functions in their modules instead.
patch_scheduler <- function(scheduler, spec) {
  if (is.null(scheduler)) scheduler else patch_methods(scheduler, paste0(spec$feature$r[["function"]], "$"), spec)
}

#' R-only: `obj`'s methods patched for the run spec's patches whose target is `<prefix><method>`; R6 locks an object's
#' method bindings: this object's are replaced, R torch's class is not.
patch_methods <- function(obj, prefix, spec) {
  targets <- unique(vapply(patch_rows(spec$patches$r), function(patch) patch$target, ""))
  for (target in targets[startsWith(targets, prefix)]) {
    patches <- patches_of(spec, target)
    if (length(patches) == 0L) next
    method <- substring(target, nchar(prefix) + 1L)
    patched <- patched_function(obj[[method]], patches, target)
    unlockBinding(method, obj)
    assign(method, patched, envir = obj)
    lockBinding(method, obj)
  }
  obj
}

#' R-only: the patched functions made so far in this process, by target and patches (`patched_function()`).
patched_functions <- new.env(parent = emptyenv())

#' `fun` with each patch's `old` statement replaced by its `new` ones, in a copy that keeps `fun`'s environment.
#'
#' R-only: made once per target and patches in a process, byte-compiled, and given each call's `fun`'s environment (a
#' method's object). Made anew at every call, a cell's traced or reconciled call rewrote its functions again (3-10 ms)
#' and R's JIT compiled them again (issue 38). Remade where `fun`'s code is not the code it was made from.
patched_function <- function(fun, patches, target) {
  key <- paste(c(target, vapply(patches, function(patch) paste(patch$id, patch$old, patch$new, sep = "\r"), "")), collapse = "\n")
  made <- get0(key, envir = patched_functions, inherits = FALSE)
  if (is.null(made) || !identical(made$original, body(fun))) {
    made <- list(original = body(fun), patched = compiler::cmpfun(rewritten_function(fun, patches, target)))
    assign(key, made, envir = patched_functions)
  }
  patched <- made$patched
  environment(patched) <- environment(fun)
  patched
}

#' R-only: `patched_function()`'s rewriting, each patch's statement found once and replaced.
rewritten_function <- function(fun, patches, target) {
  code <- body(fun)
  for (patch in patches) {
    old <- code_text(parse(text = patch$old, keep.source = FALSE)[[1]])
    found <- count_statement(code, old)
    if (found != 1L) {
      abort_cli(c(
        "Patch {.val {patch$id}}: {.fn {target}} contains {.code {patch$old}} {found} time{?s}, not once: this R torch ({packageVersion('torch')}) is not the one the patch was written for.",
        i = "Update harness/workload/patches.toml."
      ))
    }
    code <- replace_statement(code, old, with_point_calls(as.list(parse(text = patch$new, keep.source = FALSE))))
  }
  body(fun) <- code
  fun
}

#' R-only: a statement as one line of `deparse()` text, its spaces collapsed (how patches name statements).
code_text <- function(code) {
  gsub("[[:space:]]+", " ", paste(deparse(code, width.cutoff = 500L), collapse = " "))
}

#' R-only: whether argument `k` of the call `code` is a part to walk into (not NULL, not an empty argument as in `x[i, ]`).
is_part <- function(code, k) {
  !is.null(code[[k]]) && !identical(code[[k]], quote(expr = ))
}

#' R-only: how many statements of the `{` blocks within `code` read `old`.
count_statement <- function(code, old) {
  if (!is.call(code)) {
    return(0L)
  }
  found <- 0L
  for (k in seq_along(code)[-1L]) {
    if (!is_part(code, k)) next
    if (identical(code[[1]], as.name("{")) && code_text(code[[k]]) == old) found <- found + 1L
    found <- found + count_statement(code[[k]], old)
  }
  found
}

#' R-only: `code` with the statement reading `old` (in whichever `{` block holds it) replaced by the statements `new`;
#' every other argument keeps its name (`$to(device = device)` stays named).
replace_statement <- function(code, old, new) {
  if (!is.call(code)) {
    return(code)
  }
  block <- identical(code[[1]], as.name("{"))
  given <- if (is.null(names(code))) character(length(code)) else names(code)
  parts <- list(code[[1]])
  labels <- ""
  for (k in seq_along(code)[-1L]) {
    if (!is_part(code, k)) {
      parts[length(parts) + 1L] <- list(code[[k]])
      labels <- c(labels, given[[k]])
    } else if (block && code_text(code[[k]]) == old) {
      parts <- c(parts, new)
      labels <- c(labels, character(length(new)))
    } else {
      parts <- c(parts, list(replace_statement(code[[k]], old, new)))
      labels <- c(labels, given[[k]])
    }
  }
  names(parts) <- labels
  as.call(parts)
}

#' R-only: `code` with every call of `amp_parity_point` calling tracing.R's function itself (the function object, not its
#' name): the patched function keeps R torch's environment, where that name is not defined.
with_point_calls <- function(code) {
  if (is.pairlist(code)) {
    return(code) # a function's formals: no call to rewrite, and they must stay a pairlist
  }
  if (is.list(code)) {
    return(lapply(code, with_point_calls))
  }
  if (!is.call(code)) {
    return(code)
  }
  parts <- as.list(code) # names kept
  for (k in seq_along(parts)) {
    if (is_part(code, k)) parts[k] <- list(with_point_calls(code[[k]]))
  }
  if (identical(parts[[1]], as.name("amp_parity_point"))) parts[[1]] <- amp_parity_point
  as.call(parts)
}
