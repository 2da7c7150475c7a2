"""Where a result came from: the harness's version, the checkout's commit and whether it was dirty, and a digest of every
script and shared file that ran (both languages), so two results tell whether they ran the same code.

pytest-benchmark records the commit and machine with every saved run and asv keys every result by commit; a result
of this harness says as much, and more: the digests name the very files that differ between two results, which a
commit cannot (a dirty checkout, an installed wheel, a planted copy under ``$AMP_PARITY_SCRIPTS``). What the machine
was stays where it was recorded before (the result's ``environment``, each cell's ``installation``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from harness.model.codec import Stored, codec

__all__ = ["Provenance", "UNKNOWN_BEFORE_SCHEMA_9", "script_differences"]

#: Why a result upgraded from schema 8 or older has no provenance.
UNKNOWN_BEFORE_SCHEMA_9 = "provenance unknown: written by a harness before result schema 9, which recorded none"


@dataclass(frozen=True)
class Provenance(Stored):
    """Where a result came from.

    ``source``: ``checkout`` (a git checkout: ``commit`` and ``dirty`` say which, when git could tell), ``installed``
    (an installed package: no checkout, no commit), or ``unknown`` (a result older than schema 9). ``note`` says why
    a field is missing. ``scripts_root``: the folder whose ``py_scripts/`` and ``r_scripts/`` ran. ``files``: the
    SHA-256 of every file that ran, by its path (``py_scripts/loop.py``, ``r_scripts/loop.R``, and the harness's
    data files as ``harness/judge/known_differences.toml``).
    """

    harness_version: str | None = field(metadata=codec(optional=True))
    source: Literal["checkout", "installed", "unknown"]
    commit: str | None = None
    dirty: bool | None = None
    note: str | None = None
    scripts_root: str | None = None
    #: Written sorted by path, so two results' provenance diffs file by file whatever order the files were digested in.
    files: Mapping[str, str] = field(default_factory=dict, metadata=codec(encode=lambda files: dict(sorted(files.items()))))

    @classmethod
    def unknown(cls, why: str = UNKNOWN_BEFORE_SCHEMA_9) -> Provenance:
        """The provenance of a result that recorded none, saying why."""
        return cls(None, "unknown", note=why)

    @property
    def known(self) -> bool:
        """Whether the result recorded what ran (its files' digests)."""
        return bool(self.files)

    @property
    def files_digest(self) -> str | None:
        """One SHA-256 (first 12 hex digits) over every file's path and digest: two results ran the same files iff these agree."""
        if not self.files:
            return None
        digest = hashlib.sha256()
        for name in sorted(self.files):
            digest.update(f"{name}\0{self.files[name]}\n".encode())
        return digest.hexdigest()[:12]

    def differing_files(self, other: Provenance) -> list[str]:
        """The files whose digests differ between two results, or that only one ran (sorted); empty: the same files ran."""
        names = set(self.files) | set(other.files)
        return sorted(n for n in names if self.files.get(n) != other.files.get(n))

    def describe(self) -> str:
        """One line: the version, the commit (or why there is none), the files' combined digest."""
        version = f"harness {self.harness_version}" if self.harness_version else "harness version unknown"
        if self.source == "unknown":
            return f"{version}; {self.note or UNKNOWN_BEFORE_SCHEMA_9}"
        if self.commit is not None:
            state = {True: " (dirty: uncommitted changes)", False: " (clean)"}.get(self.dirty, "") if self.dirty is not None else ""
            where = f"commit {self.commit[:12]}{state}"
        else:
            where = self.note or "no commit"
        files = f"{len(self.files)} script and data files, sha256 {self.files_digest}" if self.files else "no file digests"
        return f"{version}; {where}; {files}"


def script_differences(named: Sequence[tuple[str, Provenance]]) -> list[str]:
    """One line per result that ran other scripts than the first (naming the files that differ), or whose provenance is
    unknown; none where every result ran the same files. ``named``: each result's name (its file) and provenance."""
    if len(named) < 2:
        return []
    (first_name, first), lines = named[0], []
    if not first.known:
        lines.append(f"{first_name}: {first.note}; whether the results ran the same scripts is unknown")
    for name, other in named[1:]:
        if not other.known:
            lines.append(f"{name}: {other.note}; whether it ran the same scripts as {first_name} is unknown")
        elif first.known and (differing := first.differing_files(other)):
            listed = ", ".join(differing[:6]) + (f" and {len(differing) - 6} more" if len(differing) > 6 else "")
            lines.append(f"{name} ran different scripts than {first_name}: {listed} differ{'s' if len(differing) == 1 else ''}")
    return lines
