"""Output places: claimed and checked before the first cell runs; the result and its weights published together.

A run takes minutes to hours, so everything about where it will write is settled first. For
``--json P`` (weights folder ``W`` = :func:`harness.results.weights_dir_for`), :class:`ResultClaim`

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

import contextlib
import errno
import fcntl
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

from harness.atomic import atomic_path, file_mode, folder_mode, probe_atomic
from harness.errors import AmpParityError, ResultError, UsageError
from harness.model import MatrixResult
from harness.results import WEIGHTS_MARKER, WEIGHTS_SUFFIX, is_result_file, stored_form, weights_dir_for
from harness.staging import StagingDir

__all__ = [
    "MARKER_FILE",
    "STAGING_PREFIX",
    "ResultClaim",
    "check_report_folder",
    "publish_or_rescue",
    "rescue_result",
    "write_report_or_say_why",
]

#: The file in a weights folder that says this harness wrote it, and for which result.
MARKER_FILE = WEIGHTS_MARKER
#: Staging folders beside a result (swept when their run is dead, see :mod:`harness.staging`).
STAGING_PREFIX = ".amp-parity-staging-"
_WEIGHTS_FILE_SUFFIX = ".safetensors"


class ResultClaim:
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
        self._lock_path = self.folder / f".{self.weights_dir.name}.lock"
        self._lock_fd: int | None = _take_lock(self._lock_path, self.path)
        self._staging: StagingDir | None = None
        try:
            self._check_existing()
            self._probe_names()
            self._staging = StagingDir(self.folder, STAGING_PREFIX)
        except OSError as err:
            self.close()
            raise ResultError(f"cannot write a result in {self.folder}: {_why(err)}. Choose another --json path.") from err
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> ResultClaim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def staging(self) -> Path:
        """The folder the workers write their final weights into until :meth:`publish`."""
        assert self._staging is not None, "the claim is closed"
        return self._staging.path

    def close(self) -> None:
        """Drop what is still staged and give up the claim (idempotent)."""
        if self._staging is not None:
            self._staging.close()
            self._staging = None
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._lock_path)  # while still held: a waiting run then sees a fresh file
            os.close(self._lock_fd)
            self._lock_fd = None

    def publish(self, result: MatrixResult) -> MatrixResult:
        """Publish the weights folder and the result together; return the result whose records point at ``W``.

        Weights staged elsewhere (another run's staging folder) are moved in first.

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
            (staged / MARKER_FILE).write_text(json.dumps({"result": self.path.name}) + "\n", encoding="utf-8")
            _set_modes(staged)
            published = _found_in(result, staged, Path(os.path.abspath(self.weights_dir)))  # absolute in memory, as loaded
            stored = stored_form(published, self.path)
            self._check_existing()  # a user may have put something there during the run
            self._publish_both(stored)
        except OSError as err:
            raise ResultError(f"cannot write {self.path}: {_why(err)}.") from err
        return published

    def _publish_both(self, stored: dict[str, Any]) -> None:
        """Write the result's temporary file, rename the staging folder to ``W`` (an old ``W`` moved aside
        first), rename the result onto ``P``; undo the weights' rename if the result's fails."""
        assert self._staging is not None
        old: StagingDir | None = None
        swapped = False
        try:
            with atomic_path(self.path) as tmp:
                tmp.write_text(json.dumps(stored, indent=2, allow_nan=True) + "\n", encoding="utf-8")
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
                    f"{path} is {_kind(path)}, not an amp-parity result; --overwrite replaces only those. "
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
    """Why ``folder`` is not a weights folder this harness wrote for ``result_name``, or ``None`` if it is."""
    if folder.is_symlink():
        return "is a symbolic link"
    if not folder.is_dir():
        return f"is {_kind(folder)}"
    try:
        marker = json.loads((folder / MARKER_FILE).read_text(encoding="utf-8"))
        owner = marker["result"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"was not written by amp-parity (it has no {MARKER_FILE})"
    if owner != result_name:
        return f"holds the weights of {owner!r}"
    for entry in folder.iterdir():
        ours = entry.name == MARKER_FILE or (entry.name.endswith(_WEIGHTS_FILE_SUFFIX) and entry.is_file() and not entry.is_symlink())
        if not ours:
            return f"holds {entry.name}, which amp-parity did not write"
    return None


def check_report_folder(folder: Path, overwrite: bool = False, flag: str = "--report") -> None:
    """Refuse, before any cell runs, a report folder that cannot be written or whose report would replace a file unasked.

    Missing folders are fine (the report creates them): they are created to prove it, then removed.
    An existing ``report.md`` or plot is replaced only with ``--overwrite``, and only if it is a regular file.

    Raises:
        UsageError: ``folder`` (or a parent) is a file.
        ResultError: it cannot be created or written, or holds a report and ``overwrite`` is false.
    """
    from harness.report import PLOT_FILES, REPORT_FILE

    folder = Path(folder)
    missing, existing = [], folder
    while not os.path.lexists(existing) and existing != existing.parent:
        missing.append(existing)
        existing = existing.parent
    if not existing.is_dir():
        where = "it is" if existing == folder else f"{existing} is"
        raise UsageError(flag, str(folder), f"a folder (or one to create), but {where} {_kind(existing)}")
    for name in (REPORT_FILE, *PLOT_FILES) if not missing else ():
        present = folder / name
        if not os.path.lexists(present):
            continue
        if not overwrite:
            raise ResultError(
                f"{present} already exists; pass --overwrite to replace the report in {folder}, or choose another {flag} folder."
            )
        if present.is_symlink() or not present.is_file():
            raise ResultError(
                f"{present} is {_kind(present)}; --overwrite replaces only report files. Move it away or choose another {flag} folder."
            )
    try:
        for part in reversed(missing):
            part.mkdir()
        probe_atomic(folder / REPORT_FILE)
    except OSError as err:
        raise ResultError(f"cannot write the report in {folder}: {_why(err)}. Choose another {flag} folder.") from err
    finally:
        for part in missing:
            with contextlib.suppress(OSError):
                part.rmdir()


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


def publish_or_rescue(result: MatrixResult, claim: ResultClaim) -> tuple[MatrixResult, str]:
    """Publish ``result`` after the run, or if that fails save it elsewhere rather than lose it.

    Returns the result as published (its records point at the weights where they now are) and the line
    to print; a line starting ``error:`` says why it is not where it was asked for, and where it is instead.
    """
    try:
        return claim.publish(result), f"result written to {claim.path}"
    except AmpParityError as err:
        staged = _found_in(result, claim.staging, claim.staging)  # a failed publish leaves the weights staged
        try:
            elsewhere, where = rescue_result(staged)
        except AmpParityError as again:
            return staged, f"error: {err} The result is lost: it could not be saved elsewhere either ({again})"
        return elsewhere, f"error: {err} The result was saved to {where} instead (weights beside it)."


def write_report_or_say_why(result: MatrixResult, folder: Path) -> str:
    """Write the report after the run; a failure is one ``error:`` line, not the loss of the table or the result."""
    from harness.report import write_report

    try:
        return f"report written to {write_report(result, folder)[0]}"
    except AmpParityError as err:
        return f"error: {err}"


def _refuse_impossible(path: Path) -> None:
    if path.name.endswith(WEIGHTS_SUFFIX):
        allowed = f"a file name that does not end in {WEIGHTS_SUFFIX} (it names the weights folder beside a result)"
        raise UsageError("--json", str(path), allowed)
    try:
        is_folder = path.is_dir()  # raises for a name the file system cannot hold (ENAMETOOLONG), not only says no
    except OSError as err:
        raise ResultError(f"cannot write a result at {path}: {_why(err)}. Choose another --json path.") from err
    if is_folder:
        raise UsageError("--json", str(path), f"a file, but it is a folder (e.g. {path / 'run.json'})")
    folder = path.parent
    if not os.path.lexists(folder):
        raise ResultError(
            f"cannot write a result in {folder}: it does not exist. Create it (mkdir -p {folder}) or choose another --json path."
        )
    if not folder.is_dir():
        raise ResultError(f"cannot write a result in {folder}: it is not a writable folder. Choose another --json path.")


def _take_lock(lock_path: Path, result_path: Path) -> int:
    """Open and lock ``lock_path`` without waiting; retry if a finishing run unlinked it meanwhile."""
    for _ in range(5):
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError as err:
            raise ResultError(f"cannot write a result in {lock_path.parent}: {_why(err)}. Choose another --json path.") from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ResultError(
                f"another run is writing {result_path} (it holds {lock_path}); wait for it to end or choose another --json path."
            ) from None
        with contextlib.suppress(OSError):
            if os.stat(lock_path).st_ino == os.fstat(fd).st_ino:
                return fd
        os.close(fd)
    raise ResultError(f"cannot claim {result_path}: its lock {lock_path} keeps changing. Choose another --json path.")


def _weights_files(result: MatrixResult) -> list[Path]:
    """The final-weights files the result's records name that exist (a failed cell's may not)."""
    paths = [Path(c.record.weights_path) for c in result.cells if c.record is not None and c.record.weights_path]
    return [p for p in paths if p.exists()]


def _found_in(result: MatrixResult, folder: Path, target: Path) -> MatrixResult:
    """``result`` with each weights file that is in ``folder`` (by name) named in ``target`` instead."""
    return result.map_weights_paths(lambda p: str(target / Path(p).name) if (folder / Path(p).name).is_file() else p)


def _set_modes(folder: Path) -> None:
    """The umask-based modes a plain ``mkdir``/``open()`` give (``mkdtemp`` and some writers make them owner-only)."""
    os.chmod(folder, folder_mode())
    for entry in folder.iterdir():
        os.chmod(entry, file_mode())


def _kind(path: Path) -> str:
    if path.is_symlink():
        return "a symbolic link"
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    return "a device or special file"


def _why(err: OSError) -> str:
    if err.errno == errno.ENAMETOOLONG:
        return "a name is too long for the file system (the harness adds up to 15 characters for its temporary files); use a shorter name"
    return err.strerror or str(err)
