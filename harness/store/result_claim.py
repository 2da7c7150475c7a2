"""Output places: claimed and checked before the first cell runs; the result and its weights published together.

A run takes minutes to hours, so everything about where it will write is settled first. For
``--json P`` (weights folder ``W`` = :func:`harness.store.result_file.weights_dir_for`), :class:`ResultClaim`

1. refuses what can never work: ``P`` ending in ``.weights``, a folder, a folder that is missing;
2. takes the lock ``.<W>.lock`` beside ``P`` (``flock``, held until the run ends; the kernel drops it
   when a killed run dies): a second run for the same ``P`` (or for any ``P`` with the same ``W``) is
   refused at once instead of replacing the first run's weights;
3. under that lock, looks at what is there. Nothing a user owns is touched: an existing ``P`` is
   replaced only with ``--overwrite`` and only if it is a result file; an existing ``W`` only with
   ``--overwrite`` and only if this harness wrote it for ``P`` (its marker file names ``P`` and it
   holds nothing but weights files);
4. creates and removes the temporary names the publish will use, so a read-only folder or a name too
   long for the file system fails now;
5. makes the staging folder the workers write the weights into, beside ``P`` (one file system: the
   publish is two renames, not a copy; a killed run's staging folder is swept by the next one).

:meth:`ResultClaim.publish` writes the result to its temporary file, renames the staged weights to ``W``
(an old ``W`` goes first to a staging folder, put back if anything fails), then renames the result
onto ``P``. Either both are published or neither is.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from harness.errors import AmpParityError, ResultError, UsageError
from harness.files.atomic import atomic_path, file_mode, folder_mode, os_error_text, probe_atomic
from harness.files.bounded_read import read_json_file
from harness.files.staging import StagingDir
from harness.model.result import MatrixResult, Status
from harness.store.claim import STAGING_PREFIX, Claim, inside_weights_folder, path_kind, same_place
from harness.store.lock import Lock
from harness.store.result_file import (
    MARKER_MAX_BYTES,
    RESULT_MAX_BYTES,
    WEIGHTS_MARKER,
    WEIGHTS_SUFFIX,
    check_result_place,
    is_result_file,
    read_weights_marker,
    stored_text,
    weights_dir_for,
)

__all__ = ["ResultClaim", "check_merged_result_place", "foreign_weights", "lack_of_space", "publish_or_rescue", "rescue_result"]

_WEIGHTS_FILE_SUFFIX = ".safetensors"
#: A resume cell's checkpoint is ``<weights without .safetensors>.checkpoint`` + ``.safetensors``/``.json``
#: (``checkpoint_prefix`` in py_scripts/checkpoint.py and r_scripts/checkpoint.R).
_CHECKPOINT_SUFFIX = ".checkpoint"
#: How a frontend's message says the disk was full (Python's strerror, Rust's io::Error, the errno's name).
_ENOSPC_SIGNS = (os.strerror(errno.ENOSPC), f"os error {errno.ENOSPC}", "ENOSPC", "StorageFull")


class ResultClaim(Claim):
    """The claim of one ``--json`` path for one run: checked, locked and staged; released by :meth:`close`.

    Raises:
        UsageError: the path can never hold a result (ends in ``.weights``, is a folder, or exists without ``--overwrite``).
        ResultError: its folder is missing or not writable, another run holds it, or what is there is not the harness's.
    """

    def __init__(self, path: Path, overwrite: bool = False) -> None:
        self.path = Path(path)
        self.overwrite = overwrite
        self.weights_dir = weights_dir_for(self.path)
        self.folder = self.path.parent
        _refuse_impossible(self.path)
        self._lock: Lock | None = Lock(
            self.folder / f".{self.weights_dir.name}.lock", os.path.abspath(self.path), "a result", "--json path"
        )
        self._staging: StagingDir | None = None
        try:
            self._check_existing()
            self._probe_names()
            self._staging = StagingDir(self.folder, STAGING_PREFIX)
        except OSError as err:
            self.close()
            raise ResultError(f"cannot write a result in {self.folder}: {os_error_text(err)}. Choose another --json path.") from err
        except BaseException:
            self.close()
            raise

    def publish(self, result: MatrixResult) -> MatrixResult:
        """Publish the weights folder and the result together; return the result whose records point at ``W``.

        Weights and cell traces staged elsewhere (another run's staging folder) are moved in first.

        Raises:
            ResultError: either could not be written; then neither was, an old ``P``/``W`` stays as it was,
                and the staged files are still claimed (:func:`rescue_result` can take them).
        """
        staged = self.staging
        try:
            for source in _weights_files(result):
                if source.parent != staged:
                    shutil.move(source, staged / source.name)
            result = _found_in(result, staged, staged)
            # Every file in the staging folder is the run's: the workers write nothing else there (final weights, traces, a
            # resume cell's checkpoint, its .safetensors and its .json). Each is listed, so --overwrite may replace them all.
            files = sorted(p.name for p in staged.iterdir() if p.name != WEIGHTS_MARKER and p.is_file() and not p.is_symlink())
            text = json.dumps({"result": self.path.name, "files": files}) + "\n"
            if len(text.encode()) > MARKER_MAX_BYTES:  # what its reader refuses is never written
                raise ResultError(f"cannot write {self.path}: its weights folder's {WEIGHTS_MARKER} would list {len(files)} files "
                                  f"in {len(text.encode())} bytes, over the {MARKER_MAX_BYTES} a marker may hold; run the "
                                  "matrix in slices (--mode, --optimizer, --feature) and merge them.")
            (staged / WEIGHTS_MARKER).write_text(text, encoding="utf-8")
            _set_modes(staged)
            published = _found_in(result, staged, Path(os.path.abspath(self.weights_dir)))  # absolute in memory, as loaded
            stored = stored_text(published, self.path)  # refused here if its reader would refuse it: nothing moved yet
            self._check_existing()  # a user may have put something there during the run
            self._publish_both(stored)
        except OSError as err:
            raise ResultError(f"cannot write {self.path}: {os_error_text(err)}.") from err
        return published

    def _publish_both(self, stored: str) -> None:
        """Write the result's temporary file, rename the staging folder to ``W`` (an old ``W`` moved aside
        first), rename the result onto ``P``; undo the weights' rename if the result's fails."""
        assert self._staging is not None
        old: StagingDir | None = None
        swapped = False
        try:
            with atomic_path(self.path) as tmp:
                tmp.write_text(stored, encoding="utf-8")
                if os.path.lexists(self.weights_dir):
                    old = StagingDir(self.folder, STAGING_PREFIX)
                    self.weights_dir.rename(old.path / "old")
                self._staging.path.rename(self.weights_dir)
                swapped = True
        except BaseException:
            if swapped:
                self.weights_dir.rename(self._staging.path)
            if old is not None and os.path.lexists(old.path / "old"):
                (old.path / "old").rename(self.weights_dir)
            raise
        finally:
            if old is not None:
                old.close()
        self._staging.release()
        self._staging = None

    def _check_existing(self) -> None:
        path, weights = self.path, self.weights_dir
        if os.path.lexists(path):
            if not self.overwrite:
                raise UsageError("--json", str(path), "a path that does not exist yet (or pass --overwrite)")
            if not is_result_file(path):
                raise ResultError(
                    f"{path} is {path_kind(path)}, not an amp-parity result; --overwrite replaces only those. "
                    "Move it away or choose another --json path."
                )
        if os.path.lexists(weights):
            foreign = foreign_weights(weights, path.name)
            if foreign is not None:
                raise ResultError(f"{weights} {foreign}; amp-parity never replaces it. Move it away or choose another --json path.")
            if not self.overwrite:
                raise ResultError(
                    f"{weights} already exists (the weights of an earlier run for {path.name}); "
                    "pass --overwrite to replace it, or choose another --json path."
                )

    def _probe_names(self) -> None:
        probe_atomic(self.path)
        if not os.path.lexists(self.weights_dir):
            self.weights_dir.mkdir()
            self.weights_dir.rmdir()


def foreign_weights(folder: Path, result_name: str) -> str | None:
    """Why ``folder`` is not a weights folder this harness wrote for ``result_name``, or ``None`` if it is.

    Only the files its marker names are the harness's (markers written before they listed their files:
    the files the result beside it names). Any other entry, a ``.safetensors`` file a user put there
    included, makes the folder the user's: ``--overwrite`` would delete it.
    """
    if folder.is_symlink():
        return "is a symbolic link"
    if not folder.is_dir():
        return f"is {path_kind(folder)}"
    try:
        marker = read_weights_marker(folder / WEIGHTS_MARKER)
        owner = marker["result"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"was not written by amp-parity (it has no {WEIGHTS_MARKER})"
    if owner != result_name:
        return f"holds the weights of {owner!r}"
    ours = marker.get("files") if isinstance(marker, dict) else None
    if ours is None:
        ours = _named_by_result(folder.parent / result_name, folder)
    if not isinstance(ours, list) or not all(isinstance(name, str) for name in ours):
        return f"has a {WEIGHTS_MARKER} that does not list its files; amp-parity cannot tell them from a user's"
    # A marker written before it listed every staged file listed a resume cell's checkpoint tensors
    # (``<cell>.checkpoint.safetensors``) but not the small JSON the scripts write beside them: that one is the harness's too.
    ours = [*ours, *(name.removesuffix(_WEIGHTS_FILE_SUFFIX) + ".json" for name in ours
                     if name.endswith(_CHECKPOINT_SUFFIX + _WEIGHTS_FILE_SUFFIX))]
    for entry in sorted(folder.iterdir()):
        if entry.name == WEIGHTS_MARKER:
            continue
        if entry.name not in ours or entry.is_symlink() or not entry.is_file():
            return f"holds {entry.name}, which amp-parity did not write"
    return None


def _named_by_result(result_path: Path, folder: Path) -> list[str] | None:
    """The names of the weights files in ``folder`` that the result at ``result_path`` names (``None``: unreadable)."""
    try:
        cells = read_json_file(result_path, RESULT_MAX_BYTES)["cells"]
        paths = [c["record"]["weights_path"] for c in cells if c.get("record") and c["record"].get("weights_path")]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    where = os.path.abspath(folder)
    return [Path(p).name for p in paths if os.path.dirname(os.path.abspath(result_path.parent / p)) == where]


def rescue_result(result: MatrixResult) -> tuple[MatrixResult, Path]:
    """Publish ``result`` (and its weights) into a new folder under the temporary directory: the result as
    published there, and its path.

    The last resort when the chosen ``--json`` could not be written after the run: hours of work are
    not dropped for a full disk or a folder that vanished.

    Raises:
        ResultError: it could not be written there either.
    """
    folder = Path(tempfile.mkdtemp(prefix="amp-parity-result-"))
    os.chmod(folder, folder_mode())
    with ResultClaim(folder / "result.json") as claim:
        return claim.publish(result), claim.path


def publish_or_rescue(result: MatrixResult, claim: ResultClaim) -> tuple[MatrixResult, str, Path | None]:
    """Publish ``result`` after the run, or if that fails save it elsewhere rather than lose it.

    A run in which a cell failed for lack of space (:func:`lack_of_space`) does not replace the result and
    weights it was asked to ``--overwrite``: a full disk would turn a good result into an error-only one with
    an empty weights folder. It is saved elsewhere instead, and the old pair stays.

    Returns the result as published (its records point at the weights where they now are), the line
    to print (a line starting ``error:`` says why it is not where it was asked for, and where it is instead)
    and the path the result was written to (``None``: nowhere).
    """
    short = lack_of_space(result, claim.folder)
    try:
        if short is not None and (os.path.lexists(claim.path) or os.path.lexists(claim.weights_dir)):
            raise ResultError(
                f"{short}; {claim.path} and its weights were kept: a run that failed for lack of space does not replace them."
            )
        return claim.publish(result), f"result written to {claim.path}", claim.path
    except AmpParityError as err:
        staged = _found_in(result, claim.staging, claim.staging)  # a failed publish leaves the weights staged
        try:
            elsewhere, where = rescue_result(staged)
        except AmpParityError as again:
            return staged, f"error: {err} The result is lost: it could not be saved elsewhere either ({again})", None
        return elsewhere, f"error: {err} The result was saved to {where} instead (weights beside it).", where


def lack_of_space(result: MatrixResult, folder: Path) -> str | None:
    """Which cell ended in ``error`` for lack of space on ``folder``'s file system (a line saying so), or ``None``.

    The cell's own message names ENOSPC where the frontend says it (Python, safetensors: ``No space left on
    device (os error 28)``); R's ``writeBin`` says only ``problem writing to connection``, so a failed cell
    also counts when the file system now has less room than one cell's weights need.
    """
    failed = [c for c in result.cells if c.status is Status.ERROR]
    if not failed:
        return None
    for cell in failed:
        if any(sign in (cell.reason or "") for sign in _ENOSPC_SIGNS):
            return f"{cell.id} failed for lack of space"
    need = 4 * result.spec.parameter_count + 4096  # the tensors and their header
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return None
    if free < need:
        return f"{failed[0].id} failed, and {folder} has {free} bytes free, less than one cell's weights need ({need})"
    return None


def check_merged_result_place(path: Path, overwrite: bool, inputs: Sequence[Path], report: Path, report_files: Sequence[str]) -> None:
    """Refuse, before anything is read or written, a place for ``merge --json`` that ``run --json`` would refuse, or that is one
    of the results it merges, or one of the files of the report it writes first.

    Raises:
        UsageError: it ends in ``.weights``, is a folder, is an input, is one of the report's files, or is inside a weights folder.
        ResultError: its folder is missing or not writable, or it exists (without ``--overwrite``, or not a result).
    """
    _refuse_impossible(path)
    given = next((p for p in inputs if same_place(path, p)), None)
    if given is not None:
        raise UsageError("--json", str(path), f"a file apart from the results it merges (it is the input {given}), even with --overwrite")
    real = Path(os.path.realpath(path))
    holder = next((p for p in inputs if Path(os.path.realpath(weights_dir_for(Path(p)))) in real.parents), None)
    if holder is not None:  # a weights folder from before markers (schema 2) is an input's too
        raise UsageError("--json", str(path), f"a path outside the weights folder {weights_dir_for(Path(holder))} of the input {holder}")
    name = next((n for n in report_files if same_place(path, Path(report) / n)), None)
    if name is not None:
        raise UsageError("--json", str(path), f"a file apart from the report written to --out {report} (it is the report's {name})")
    check_result_place(path, overwrite)
    try:
        probe_atomic(path)
    except OSError as err:
        raise ResultError(f"cannot write a result at {path}: {os_error_text(err)}. Choose another --json path.") from err


def _refuse_impossible(path: Path) -> None:
    if path.name.endswith(WEIGHTS_SUFFIX):
        allowed = f"a file name that does not end in {WEIGHTS_SUFFIX} (it names the weights folder beside a result)"
        raise UsageError("--json", str(path), allowed)
    try:
        is_folder = path.is_dir()  # raises for a name the file system cannot hold (ENAMETOOLONG), not only says no
    except OSError as err:
        raise ResultError(f"cannot write a result at {path}: {os_error_text(err)}. Choose another --json path.") from err
    if is_folder:
        raise UsageError("--json", str(path), f"a file, but it is a folder (e.g. {path / 'run.json'})")
    folder = path.parent
    if not os.path.lexists(folder):
        raise ResultError(
            f"cannot write a result in {folder}: it does not exist. Create it (mkdir -p {folder}) or choose another --json path."
        )
    if not folder.is_dir():
        raise ResultError(f"cannot write a result in {folder}: it is not a writable folder. Choose another --json path.")
    weights_folder = inside_weights_folder(folder)
    if weights_folder is not None:
        raise UsageError("--json", str(path), f"a path outside amp-parity's weights folder {weights_folder} (a result there makes "
                                             "--overwrite refuse that folder)")


def _weights_files(result: MatrixResult) -> list[Path]:
    """The files the result's cells name that exist (a failed cell's may not): final weights and cell traces."""
    paths = [Path(c.record.weights_path) for c in result.cells if c.record is not None and c.record.weights_path]
    paths += [Path(t.path) for c in result.cells for t in (c.trace, c.reconciled) if t is not None]
    return [p for p in paths if p.exists()]


def _found_in(result: MatrixResult, folder: Path, target: Path) -> MatrixResult:
    """``result`` with each weights file that is in ``folder`` (by name) named in ``target`` instead."""
    return result.map_weights_paths(lambda p: str(target / Path(p).name) if (folder / Path(p).name).is_file() else p)


def _set_modes(folder: Path) -> None:
    """The umask-based modes a plain ``mkdir``/``open()`` give (``mkdtemp`` and some writers make them owner-only)."""
    os.chmod(folder, folder_mode())
    for entry in folder.iterdir():
        os.chmod(entry, file_mode())
