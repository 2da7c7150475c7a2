#' Our R files, byte-compiled once: how the harness's R worker loads the shared files and each script.
#'
#' R's JIT (on by default, level 3) compiles each function of ours when it is called: a global one at its first call, one
#' in a script's environment at its second. A script's first call in a fresh worker spent most of its time compiling
#' (Rprof: 70 % in `cmpfun`), and its second call half of it. The JIT stays on, as R torch's users run it;
#' `source_compiled()` evaluates the file's expressions compiled by `compiler::compile()`, so every function the file
#' defines is byte code already and the JIT has nothing of ours left to compile (with_autocast, default, tiny: the first
#' call 0.25 s instead of 0.38, the second 0.05 s instead of 0.09; what the JIT still compiles in the first is R torch's,
#' R6's and withr's). The compiled expressions are kept in a cache folder (`amp_parity_bytecode_dir`, which the
#' worker sets: harness/worker_side/r_handler.py), so only the first worker after a change pays the compile.
#'
#' A cache entry is keyed by the file's MD5 (base R 4.2 has no SHA-256; MD5 tells an edited file from the one cached, and
#' the cache defends against no one), R's version string, the compiler's version and its optimization level: compiled
#' code inlines base R's functions. What the compiler inlines depends on nothing else: at its default level (2) it
#' inlines without a guard only base R's language functions (`{`, `if`, `<-`, `[`, ...: `compiler:::languageFuns`), none
#' of which our files redefine, and other base functions behind a guard that checks at run time that the name still
#' means base R's function. Whatever cannot be read or written falls back to `source()` with one line on R's console
#' (the worker logs it); a file that fails to parse is `source()`d too, so its error is `source()`'s own.

#' The R and compiler this cache's entries are for, in every entry's key (and the first two in the name of its
#' subfolder): byte code compiled by another R may not run in this one, and another compiler or level may inline
#' otherwise (the JIT compiles at the level `compiler::setCompilerOptions()` sets).
bytecode_build <- c(
  r = R.version.string, compiler = as.character(utils::packageVersion("compiler")),
  optimize = as.character(compiler::getCompilerOption("optimize"))
)

#' The subfolder of the cache folder for this R: entries of another R are never even read.
bytecode_subfolder <- gsub("[^A-Za-z0-9.-]+", "_", paste(bytecode_build[["r"]], "compiler", bytecode_build[["compiler"]]))

#' Notes already given (`bytecode_note()`), by what they are about.
bytecode_notes <- new.env(parent = emptyenv())

#' Evaluate the R file `path` in `envir`, as `source(path, local = envir)` does, from its compiled expressions.
#'
#' Each expression is evaluated in turn in `envir`, as `source()` does (an error stops the file where it happens). With
#' `keep.source` on (rpy2's R is interactive) the functions keep their source references as `source()`'s do, naming
#' `path` and its current modification time. Without `amp_parity_bytecode_dir` (the bridge sourced by hand) this is
#' `source()`. The path a file is loaded on every time (a cache hit) is kept short: R's JIT compiles these functions
#' on their first call, and that compile is on the worker's start.
source_compiled <- function(path, envir) {
  folder <- get0("amp_parity_bytecode_dir", mode = "character")
  code <- if (is.null(folder)) NULL else cached_code(path, file.path(folder, bytecode_subfolder))
  if (is.null(code)) {
    return(invisible(source(path, local = envir)))
  }
  for (ei in code) eval(ei, envir) # source()'s names: an error's call reads as it does under source()
  invisible(NULL)
}

#' The compiled expressions of `path` from the cache folder `folder`, else compiled now and kept there (`NULL`: not
#' available, `source()` the file).
cached_code <- function(path, folder) {
  digest <- unname(tools::md5sum(path))
  if (is.na(digest)) {
    return(NULL) # missing or unreadable: source() says so in its own words
  }
  keep_source <- isTRUE(getOption("keep.source"))
  key <- c(bytecode_build, md5 = digest, keep_source = as.character(keep_source))
  entry <- file.path(folder, sprintf("%s-%s%s.rds", sub("\\.R$", "", basename(path)), digest, if (keep_source) "-srcref" else ""))
  cached <- if (file.exists(entry)) tryCatch(readRDS(entry), error = function(err) NULL, warning = function(w) NULL)
  if (is.list(cached) && identical(cached$key, key)) {
    if (keep_source) renamed_srcfile(cached$srcfile, path)
    return(cached$code)
  }
  if (file.exists(entry)) {
    bytecode_note(entry, sprintf("%s is unreadable or not this file's; compiling %s again.", entry, basename(path)))
  }
  compiled_into(entry, path, key)
}

#' The source file record of a cache entry, made to name `path` as it is now (the entry may have been compiled from a
#' copy elsewhere with the same content).
renamed_srcfile <- function(srcfile, path) {
  if (is.environment(srcfile)) {
    srcfile$filename <- path
    srcfile$wd <- getwd()
    srcfile$timestamp <- file.mtime(path)[1]
  }
  invisible(NULL)
}

#' `path` compiled and written to the cache entry `entry` under `key` (a temporary file in its folder, then renamed:
#' a worker starting beside this one reads the old entry or the new, never half of one); its compiled expressions, or
#' `NULL` where the folder cannot be written (checked before compiling, which takes a tenth of a second) or the file
#' does not parse or compile.
#'
#' Read and parsed as `source()` reads and parses it (its source references when `keep.source` is on); compiled
#' against the global environment: a cache entry serves every environment its file is loaded in, and what the compiler
#' inlines does not depend on which (see the top of this file). Kept only if the file still has the digest it had
#' before it was read: an edit in between keeps nothing.
compiled_into <- function(entry, path, key) {
  folder <- dirname(entry)
  temp <- tempfile(sprintf(".%s-%d-", basename(entry), Sys.getpid()), tmpdir = folder, fileext = ".tmp")
  on.exit(unlink(temp), add = TRUE)
  unwritable <- sprintf("cannot write to %s; sourcing the files instead (set AMP_PARITY_CACHE to a writable folder).", folder)
  ready <- tryCatch(
    {
      dir.create(folder, recursive = TRUE, showWarnings = FALSE)
      file.create(temp, showWarnings = FALSE)
    },
    error = function(err) FALSE
  )
  if (!isTRUE(ready)) {
    bytecode_note(folder, unwritable)
    return(NULL)
  }
  keep_source <- key[["keep_source"]] == "TRUE"
  lines <- readLines(path, warn = FALSE)
  srcfile <- if (keep_source) srcfilecopy(path, lines, file.mtime(path)[1], isFile = TRUE) else NULL
  expressions <- tryCatch(parse(text = lines, srcfile = srcfile, keep.source = keep_source), error = function(err) NULL)
  if (is.null(expressions)) {
    return(NULL) # source() raises the parse error, in its own words
  }
  references <- attr(expressions, "srcref")
  code <- tryCatch(
    lapply(seq_along(expressions), function(k) compiler::compile(expressions[[k]], globalenv(), srcref = references[[k]])),
    error = function(err) {
      bytecode_note(path, sprintf("cannot compile %s (%s); sourcing it instead.", path, conditionMessage(err)))
      NULL
    }
  )
  if (is.null(code) || !identical(unname(tools::md5sum(path)), key[["md5"]])) {
    return(code)
  }
  # Uncompressed: read at every worker start, the entry of the one shared file before issue 45 (0.7 MB) took 3 ms where gzip's (0.1 MB) takes 5.5.
  saved <- tryCatch(
    {
      saveRDS(list(key = key, srcfile = srcfile, code = code), temp, compress = FALSE)
      file.rename(temp, entry)
    },
    error = function(err) FALSE, warning = function(w) FALSE
  )
  if (!isTRUE(saved)) {
    bytecode_note(folder, unwritable)
    return(NULL)
  }
  older_entries_removed(entry)
  code
}

#' How many entries of one file the cache keeps, the newest: each edit of a file makes one (the shared files' together about 0.7 MB), and
#' a few cover the checkouts and copies in use at once (one removed too soon is compiled again, a tenth of a second).
bytecode_kept <- 4L

#' Remove all but the `bytecode_kept` newest entries of `entry`'s file from its folder.
older_entries_removed <- function(entry) {
  stem <- sub("-[0-9a-f]{32}(-srcref)?\\.rds$", "", basename(entry))
  entries <- list.files(dirname(entry), pattern = "\\.rds$", full.names = TRUE)
  entries <- entries[sub("-[0-9a-f]{32}(-srcref)?\\.rds$", "", basename(entries)) == stem]
  entries <- entries[order(file.mtime(entries), decreasing = TRUE)]
  unlink(entries[-seq_len(bytecode_kept)])
  invisible(NULL)
}

#' One line on R's console about the cache (a `message()`: the worker logs it as a warning), once per `what` in a process.
bytecode_note <- function(what, text) {
  if (is.null(bytecode_notes[[what]])) {
    bytecode_notes[[what]] <- TRUE
    message("R byte-code cache: ", text)
  }
  invisible(NULL)
}
