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

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from harness.errors import AmpParityError, ResultError, UsageError
from harness.files.atomic import atomic_path, file_mode, folder_mode, os_error_text, probe_atomic
from harness.files.bounded_read import read_json_file
from harness.files.staging import StagingDir
from harness.model.result import MatrixResult, Status
from harness.store.lock import Lock
from harness.store.result_file import (
    RESULT_MAX_BYTES,
    WEIGHTS_MARKER,
    WEIGHTS_SUFFIX,
    check_result_place,
    is_result_file,
    read_weights_marker,
    stored_form,
    weights_dir_for,
)

__all__ = [
    "REPORT_LOCK",
    "ReportClaim",
    "ResultClaim",
    "STAGING_PREFIX",
    "check_merged_result_place",
    "check_report_folder",
    "inside_weights_folder",
    "publish_report_with_result",
    "publish_or_rescue",
    "rescue_result",
]

#: Staging folders beside a result (swept when their run is dead, see :mod:`harness.files.staging`).
STAGING_PREFIX = ".amp-parity-staging-"
#: The lock a run (or ``report``) holds in its report folder while it may write there.
REPORT_LOCK = ".amp-parity-report.lock"
_WEIGHTS_FILE_SUFFIX = ".safetensors"
#: How a frontend's message says the disk was full (Python's strerror, Rust's io::Error, the errno's name).
_ENOSPC_SIGNS = (os.strerror(errno.ENOSPC), f"os error {errno.ENOSPC}", "ENOSPC", "StorageFull")


class _Claim:
    """What every claim of an output place shares: a staging folder beside it, and a ``with`` block that gives it up."""

    _staging: StagingDir | None
    _lock: Lock | None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop what is still staged and give up the claim (idempotent)."""
        if self._staging is not None:
            self._staging.close()
            self._staging = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @property
    def staging(self) -> Path:
        """The folder the output is written into until it is published."""
        assert self._staging is not None, "the claim is closed"
        return self._staging.path


class ResultClaim(_Claim):
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
            files = sorted(p.name for p in staged.iterdir() if p.name.endswith(_WEIGHTS_FILE_SUFFIX))
            marker = {"result": self.path.name, "files": files}  # only these are amp-parity's (a user's .safetensors is not)
            (staged / WEIGHTS_MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
            _set_modes(staged)
            published = _found_in(result, staged, Path(os.path.abspath(self.weights_dir)))  # absolute in memory, as loaded
            stored = stored_form(published, self.path)
            self._check_existing()  # a user may have put something there during the run
            self._publish_both(stored)
        except OSError as err:
            raise ResultError(f"cannot write {self.path}: {os_error_text(err)}.") from err
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
    """Why ``folder`` is not a weights folder this harness wrote for ``result_name``, or ``None`` if it is.

    Only the files its marker names are the harness's (markers written before they listed their files:
    the files the result beside it names). Any other entry, a ``.safetensors`` file a user put there
    included, makes the folder the user's: ``--overwrite`` would delete it.
    """
    if folder.is_symlink():
        return "is a symbolic link"
    if not folder.is_dir():
        return f"is {_kind(folder)}"
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


def check_report_folder(folder: Path, files: Sequence[str], overwrite: bool = False, flag: str = "--report") -> None:
    """Refuse, before any cell runs, a report folder that cannot be written or whose report would replace a file unasked.

    ``files``: the names a report consists of, its document first (the view that draws it owns them:
    :data:`harness.views.report.REPORT_FILES`). Missing folders are fine (the report creates them): they are created
    to prove it, then removed. An existing report file is replaced only with ``--overwrite``, and only if it is a regular file.

    Raises:
        UsageError: ``folder`` (or a parent) is a file.
        ResultError: it cannot be created or written, or holds a report and ``overwrite`` is false.
    """
    folder = Path(folder)
    missing, existing = [], folder
    while not os.path.lexists(existing) and existing != existing.parent:
        missing.append(existing)
        existing = existing.parent
    if not existing.is_dir():
        where = "it is" if existing == folder else f"{existing} is"
        raise UsageError(flag, str(folder), f"a folder (or one to create), but {where} {_kind(existing)}")
    for name in files if not missing else ():
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
        _refuse_foreign(present, flag)
    try:
        for part in reversed(missing):
            part.mkdir()
        probe_atomic(folder / files[0])
    except OSError as err:
        raise ResultError(f"cannot write the report in {folder}: {os_error_text(err)}. Choose another {flag} folder.") from err
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
    need = 4 * sum(o * i + o for o, i in result.spec.layer_shapes) + 4096  # the tensors and their header
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return None
    if free < need:
        return f"{failed[0].id} failed, and {folder} has {free} bytes free, less than one cell's weights need ({need})"
    return None


class ReportClaim(_Claim):
    """The claim of one report folder (``run --report DIR``, ``report --out DIR``): checked, locked and staged
    before any work; the report is written into the staging folder and moved into ``DIR`` by :meth:`publish`.

    A check before the run is not enough: a run takes minutes, and a ``report.md`` a user writes meanwhile,
    or a second run's report, would be replaced unasked. So the folder is locked for the run (a second run
    with the same folder is refused at once, naming the first), and :meth:`publish` never replaces a file
    that appeared meanwhile unless ``--overwrite`` was given. Folders the claim created are removed again
    if no report was published (an interrupted or failed run leaves no empty folder).

    ``files``: the names a report consists of, its document first (see :func:`check_report_folder`).
    ``result``: the run's result claim; its path and weights folder (and any other result's weights folder)
    can never be a report folder. ``inputs``: files the command reads or writes besides the report (``report``'s result,
    ``merge``'s inputs and its ``--json``): no report file may be one of them, even with ``--overwrite``.

    Raises:
        UsageError: ``folder`` (or a parent) is a file, or is the result or a weights folder.
        ResultError: it cannot be created or written, holds a report and ``overwrite`` is false, or another run holds it.
    """

    def __init__(
        self, folder: Path, files: Sequence[str], overwrite: bool = False, flag: str = "--report", result: ResultClaim | None = None,
        inputs: Sequence[Path] = (),
    ) -> None:
        self.folder = Path(folder)
        self.files = tuple(files)
        self.overwrite = overwrite
        self.flag = flag
        self.published = False
        self._moved: list[Path] = []
        self._created: list[Path] = []
        self._lock: Lock | None = None
        self._staging: StagingDir | None = None
        _refuse_report_place(self.folder, self.files, flag, result, inputs)
        check_report_folder(self.folder, self.files, overwrite, flag)
        try:
            missing = []
            part = self.folder
            while not os.path.lexists(part) and part != part.parent:
                missing.append(part)
                part = part.parent
            for part in reversed(missing):
                part.mkdir()
                self._created.append(part)
            where = os.path.abspath(self.folder)
            self._lock = Lock(self.folder / REPORT_LOCK, f"the report in {where}", "the report", f"{flag} folder")
            self._staging = StagingDir(self.folder, STAGING_PREFIX)
        except OSError as err:
            self.close()
            raise ResultError(f"cannot write the report in {self.folder}: {os_error_text(err)}. Choose another {flag} folder.") from err
        except BaseException:
            self.close()
            raise

    def publish(self) -> list[Path]:
        """Move the staged report into the folder (its document last); return the document, then the other files.

        Raises:
            ResultError: a report file appeared in the folder during the run and ``--overwrite`` was not given
                (or is not a regular file); nothing is moved then. Or it could not be moved (then nothing stays moved).
        """
        document = self.files[0]
        names = [name for name in (*self.files[1:], document) if (self.staging / name).is_file()]
        for name in names:
            self._check_target(self.folder / name)
        moved: list[Path] = []
        try:
            for name in names:
                _move(self.staging / name, self.folder / name, replace=self.overwrite)
                moved.append(self.folder / name)
        except FileExistsError as err:
            _unmove(moved, self.staging)
            raise self._appeared(Path(err.filename2 or err.filename)) from err
        except OSError as err:
            _unmove(moved, self.staging)
            why = os_error_text(err)
            raise ResultError(f"cannot write the report in {self.folder}: {why}. Choose another {self.flag} folder.") from err
        self.published = True
        self._moved = moved
        return [p for p in moved if p.name == document] + [p for p in moved if p.name != document]

    def withdraw(self) -> None:
        """Take a published report back into the staging folder (its companion output could not be written)."""
        if self.published:
            _unmove(self._moved, self.staging)
            self.published, self._moved = False, []

    def _check_target(self, target: Path) -> None:
        if not os.path.lexists(target):
            return
        if not self.overwrite:
            raise self._appeared(target)
        if target.is_symlink() or not target.is_file():
            raise ResultError(
                f"{target} is {_kind(target)}; --overwrite replaces only report files. Move it away or choose another {self.flag} folder."
            )
        _refuse_foreign(target, self.flag)

    def _appeared(self, target: Path) -> ResultError:
        return ResultError(
            f"{target} appeared during the run; it is replaced only with --overwrite. No report was written: write it with "
            f"`python -m harness report RESULT --out {self.folder}`, or choose another {self.flag} folder."
        )

    def close(self) -> None:
        """Drop what is still staged, give up the folder, and remove the folders this claim created if no report went there."""
        super().close()
        if not self.published:
            for part in reversed(self._created):
                with contextlib.suppress(OSError):
                    part.rmdir()  # only if empty: nothing anyone put there is removed
        self._created = []


#: How each report file amp-parity writes begins (``harness/views/report.py``, ``page.py`` and ``summary.py`` write them;
#: ``tests/unit/store/test_outputs.py`` holds them together), by name; a plot by its PNG signature. A file of the report's
#: folder not named here is not one of the report's and is never replaced.
_REPORT_STARTS = {"report.md": b"# amp-parity report", "summary.md": b"# amp-parity \xc2\xb7 ", "report.html": b"<!DOCTYPE html>"}
_PNG_START = b"\x89PNG\r\n\x1a\n"
#: What marks the page as amp-parity's beyond its doctype: its generator line, within its first kilobyte.
_PAGE_MARK = b'<meta name="generator" content="amp-parity">'


def _refuse_foreign(present: Path, flag: str) -> None:
    """Refuse to replace a report file that amp-parity did not write (a user's notes in ``report.md``): ``--overwrite``
    replaces only what the harness wrote, as it does for results and weights folders."""
    start = _REPORT_STARTS.get(present.name, _PNG_START if present.suffix == ".png" else None)
    try:
        with present.open("rb") as handle:
            head = handle.read(1024)
    except OSError as err:
        raise ResultError(f"cannot read {present}: {os_error_text(err)}. Move it away or choose another {flag} folder.") from err
    ours = start is not None and head.startswith(start) and (present.name != "report.html" or _PAGE_MARK in head)
    if not ours:
        raise ResultError(f"{present} was not written by amp-parity (it does not begin as its report does); --overwrite replaces "
                          f"only what amp-parity wrote. Move it away or choose another {flag} folder.")


def _refuse_report_place(
    folder: Path, files: tuple[str, ...], flag: str, result: ResultClaim | None, inputs: Sequence[Path] = (),
) -> None:
    """Refuse a report folder that is the run's result, inside its weights folder, or any amp-parity weights folder:
    a report there would be overwritten by the result, or make every later ``--overwrite`` refuse the folder. Refuse one
    where a report file would replace one of ``inputs`` (``report --out DIR --overwrite`` replaced the result it read,
    ``DIR/report.md``, and orphaned its weights folder)."""
    real = Path(os.path.realpath(folder))
    if result is not None:
        allowed = f"a folder apart from the result (--json {result.path}) and its weights folder {result.weights_dir}"
        weights = Path(os.path.realpath(result.weights_dir))
        if real == Path(os.path.realpath(result.path)) or real == weights or weights in real.parents:
            raise UsageError(flag, str(folder), allowed)
        if Path(os.path.realpath(result.path)).parent == real and result.path.name in files:
            raise UsageError(flag, str(folder), f"a folder where no report file is the result (--json {result.path})")
    for given in inputs:
        weights = Path(os.path.realpath(weights_dir_for(Path(given))))
        if real == weights or weights in real.parents:
            raise UsageError(flag, str(folder), f"a folder apart from the weights folder {weights_dir_for(Path(given))} of {given}")
        same = next((name for name in files if _same_place(real / name, Path(given))), None)
        if same is not None:
            raise UsageError(flag, str(folder), f"a folder where no report file replaces {given}, which this command reads or "
                                                f"writes (the report's {same} would be it); move it, or choose another folder")
    weights_folder = inside_weights_folder(real)
    if weights_folder is not None:
        raise UsageError(
            flag, str(folder), f"a folder outside amp-parity's weights folder {weights_folder} (a report there makes --overwrite refuse it)"
        )


def inside_weights_folder(path: Path) -> Path | None:
    """The amp-parity weights folder (one holding its marker) that ``path`` is, or is inside; ``None`` if none."""
    real = Path(os.path.realpath(path))
    return next((part for part in (real, *real.parents) if os.path.lexists(part / WEIGHTS_MARKER)), None)


def _same_place(a: Path, b: Path) -> bool:
    """Whether two paths name one file (through links and ``..``), existing or not."""
    return os.path.realpath(a) == os.path.realpath(b)


def check_merged_result_place(path: Path, overwrite: bool, inputs: Sequence[Path], report: Path, report_files: Sequence[str]) -> None:
    """Refuse, before anything is read or written, a place for ``merge --json`` that ``run --json`` would refuse, or that is one
    of the results it merges, or one of the files of the report it writes first.

    Raises:
        UsageError: it ends in ``.weights``, is a folder, is an input, is one of the report's files, or is inside a weights folder.
        ResultError: its folder is missing or not writable, or it exists (without ``--overwrite``, or not a result).
    """
    _refuse_impossible(path)
    given = next((p for p in inputs if _same_place(path, p)), None)
    if given is not None:
        raise UsageError("--json", str(path), f"a file apart from the results it merges (it is the input {given}), even with --overwrite")
    real = Path(os.path.realpath(path))
    holder = next((p for p in inputs if Path(os.path.realpath(weights_dir_for(Path(p)))) in real.parents), None)
    if holder is not None:  # a weights folder from before markers (schema 2) is an input's too
        raise UsageError("--json", str(path), f"a path outside the weights folder {weights_dir_for(Path(holder))} of the input {holder}")
    name = next((n for n in report_files if _same_place(path, Path(report) / n)), None)
    if name is not None:
        raise UsageError("--json", str(path), f"a file apart from the report written to --out {report} (it is the report's {name})")
    check_result_place(path, overwrite)
    try:
        probe_atomic(path)
    except OSError as err:
        raise ResultError(f"cannot write a result at {path}: {os_error_text(err)}. Choose another --json path.") from err


def publish_report_with_result(claim: ReportClaim, result: MatrixResult, path: Path, overwrite: bool) -> list[Path]:
    """Publish ``claim``'s report and write ``result`` at ``path`` together: both or neither (``merge --json``).

    The result goes to its temporary file first; the report is published; the result is renamed into place. If the
    report cannot be published, the result is not written; if the result cannot be renamed, the report is taken back.

    Raises:
        ResultError: either could not be written (then neither is there, and an old result at ``path`` stays).
    """
    check_result_place(path, overwrite)  # again: a file may have appeared there since the check before the merge
    stored = stored_form(result, path)
    written: list[Path] = []
    try:
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(stored, indent=2, allow_nan=True) + "\n", encoding="utf-8")
            written = claim.publish()
    except OSError as err:
        if written:
            claim.withdraw()
        raise ResultError(f"cannot write {path}: {os_error_text(err)}; no report was written either. Choose another --json path.") from err
    except BaseException:
        if written:
            claim.withdraw()
        raise
    return written


def _move(source: Path, target: Path, replace: bool) -> None:
    """Rename ``source`` onto ``target``; without ``replace``, never over a file that exists (``FileExistsError``)."""
    if replace:
        os.replace(source, target)
        return
    try:
        os.link(source, target)  # fails if target exists, atomically: a file that appeared meanwhile is never replaced
    except FileExistsError:
        raise
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if os.path.lexists(target):  # a file system without hard links: check, then rename
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target)) from err
        os.rename(source, target)
        return
    os.unlink(source)


def _unmove(moved: list[Path], staging: Path) -> None:
    """Put files :func:`_move` moved back into ``staging`` (a failed publish leaves no half report)."""
    for path in moved:
        with contextlib.suppress(OSError):
            os.replace(path, staging / path.name)


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


def _kind(path: Path) -> str:
    if path.is_symlink():
        return "a symbolic link"
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    return "a device or special file"

