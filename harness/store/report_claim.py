"""A report folder's claim: checked, locked and staged before any work, the report moved in when it is written.

A report is several files (the page, the markdown, the summary, the plots) in a folder a user names. Nothing a user
owns is replaced: an existing report file only with ``--overwrite`` and only if amp-parity wrote it; a folder the claim
created is removed again if no report went there. ``merge`` publishes its report and its result together
(:func:`publish_report_with_result`).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Sequence
from pathlib import Path

from harness.errors import ResultError, UsageError
from harness.files.atomic import atomic_path, os_error_text, probe_atomic
from harness.files.staging import StagingDir
from harness.model.result import MatrixResult
from harness.store.claim import STAGING_PREFIX, Claim, inside_weights_folder, path_kind, same_place
from harness.store.lock import Lock
from harness.store.result_claim import ResultClaim
from harness.store.result_file import check_result_place, stored_text, weights_dir_for

__all__ = ["REPORT_LOCK", "ReportClaim", "check_report_folder", "publish_report_with_result"]
#: The lock a run (or ``report``) holds in its report folder while it may write there.
REPORT_LOCK = ".amp-parity-report.lock"


class ReportClaim(Claim):
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
                f"{target} is {path_kind(target)}; --overwrite replaces only report files. Move it away or choose another "
                f"{self.flag} folder."
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
        raise UsageError(flag, str(folder), f"a folder (or one to create), but {where} {path_kind(existing)}")
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
                f"{present} is {path_kind(present)}; --overwrite replaces only report files. Move it away or choose another {flag} folder."
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
        same = next((name for name in files if same_place(real / name, Path(given))), None)
        if same is not None:
            raise UsageError(flag, str(folder), f"a folder where no report file replaces {given}, which this command reads or "
                                                f"writes (the report's {same} would be it); move it, or choose another folder")
    weights_folder = inside_weights_folder(real)
    if weights_folder is not None:
        raise UsageError(
            flag, str(folder), f"a folder outside amp-parity's weights folder {weights_folder} (a report there makes --overwrite refuse it)"
        )


def publish_report_with_result(claim: ReportClaim, result: MatrixResult, path: Path, overwrite: bool) -> list[Path]:
    """Publish ``claim``'s report and write ``result`` at ``path`` together: both or neither (``merge --json``).

    The result goes to its temporary file first; the report is published; the result is renamed into place. If the
    report cannot be published, the result is not written; if the result cannot be renamed, the report is taken back.

    Raises:
        ResultError: either could not be written (then neither is there, and an old result at ``path`` stays).
    """
    check_result_place(path, overwrite)  # again: a file may have appeared there since the check before the merge
    stored = stored_text(result, path)  # a result its reader would refuse is refused before the report is published
    written: list[Path] = []
    try:
        with atomic_path(path) as tmp:
            tmp.write_text(stored, encoding="utf-8")
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
