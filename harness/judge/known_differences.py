"""Known differences: the divergences between frontends that are understood and are not the harness's to fix.

The list is data (``harness/judge/known_differences.toml``, reviewed like code; ``docs/known-differences.md``).
Each entry names the pairs and devices it covers, the trace signature a divergence must have to be it
(the first differing point, at a step where the entry's trigger holds, within a distance), the mechanism
with the source lines on both sides, and where it stands upstream. Judging (:mod:`harness.judge.pairs`) asks
two questions of it: does a divergent pair's trace match an entry (:meth:`KnownDifference.matches`), and
did an identical pair's trace show an entry's trigger (then the entry is stale: like a strict xfail, the
run fails with "remove or update entry X").
"""

from __future__ import annotations

import fnmatch
import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import KnownDifferencesError
from harness.judge.divergence import TRIGGERS
from harness.model.trace import PairTrace

__all__ = ["DEFAULT_LIST", "KnownDifference", "Signature", "load_known_differences"]

#: The committed list.
DEFAULT_LIST = Path(__file__).with_name("known_differences.toml")
#: Bound on the list's size: it is a handful of reviewed entries, never a dump.
_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Signature:
    """What a pair's trace must show to be this difference: where it first parts, when, and how far."""

    first_point: str
    #: ``"trigger"``: a step where the entry's trigger holds; otherwise the steps allowed.
    first_step: str | tuple[int, ...]
    max_distance: int


@dataclass(frozen=True)
class KnownDifference:
    """One entry of the list (its fields are documented at the top of ``known_differences.toml``)."""

    id: str
    title: str
    pairs: tuple[str, ...]
    devices: tuple[str, ...]
    frontends: tuple[str, str]
    trigger: str
    seen_on: tuple[str, ...]
    signature: Signature
    mechanism: str
    sources: tuple[str, ...]
    upstream: str

    def applies(self, pair: str, device: str, frontends: tuple[str, str]) -> bool:
        """Whether this entry covers ``pair`` (a pair id ``script-mode-optimizer-device``) on ``device`` between ``frontends``:
        the two sides' languages (``python``, ``r``), whatever the installations are named, so R torch on any libtorch is
        covered. An entry names ``script-mode`` (every optimizer) or ``script-mode-optimizer`` (that one only)."""
        base = pair.removesuffix(f"-{device}")
        without_optimizer = base.rpartition("-")[0]  # script, mode and optimizer names have no '-'
        return (base in self.pairs or without_optimizer in self.pairs) and device in self.devices and tuple(frontends) == self.frontends

    def trigger_steps(self, trace: PairTrace) -> tuple[int, ...]:
        """The steps at which the trace shows this entry's trigger (none: the difference has no reason to show)."""
        return tuple(trace.triggers.get(self.trigger, ()))

    def mismatch(self, trace: PairTrace) -> str | None:
        """Why ``trace`` is not this difference, or ``None`` when it matches the signature."""
        first = trace.first_difference
        if trace.error is not None:
            return f"no trace ({trace.error})"
        if first is None:
            return "the trace shows no difference"
        if not fnmatch.fnmatchcase(first.point, self.signature.first_point):
            return f"it first differs at {first.point}, not {self.signature.first_point}"
        allowed = self.trigger_steps(trace) if self.signature.first_step == "trigger" else self.signature.first_step
        if first.step not in allowed:
            where = f"a step where {self.trigger} holds" if self.signature.first_step == "trigger" else f"steps {list(allowed)}"
            return f"it first differs at step {first.step}, not at {where}"
        if first.kind != "bytes" or first.max_distance is None:
            return f"its first difference is of kind {first.kind!r}, not a distance between two values"
        if first.max_distance > self.signature.max_distance:
            return f"its first difference is {first.max_distance} apart, beyond the entry's {self.signature.max_distance}"
        return None

    def matches(self, trace: PairTrace) -> bool:
        """Whether ``trace`` has this entry's signature."""
        return self.mismatch(trace) is None

    def lines(self) -> list[str]:
        """The entry as a pair's explanation shows it: what, why (its first sentence), where it stands upstream."""
        why = " ".join(self.mechanism.split())
        upstream = " ".join(self.upstream.split())
        return [f"known difference {self.id}: {self.title}", f"  why: {why}", f"  upstream: {upstream}"]


@functools.lru_cache(maxsize=8)
def load_known_differences(path: Path = DEFAULT_LIST) -> tuple[KnownDifference, ...]:
    """The entries of a known-differences list, every field checked.

    Raises:
        KnownDifferencesError: one line naming the file, the entry and the field that is missing or wrong.
    """
    try:
        if not path.is_file():
            raise KnownDifferencesError(f"{path} is not a file: pass a known-differences TOML file (see docs/known-differences.md).")
        with path.open("rb") as handle:
            raw = handle.read(_MAX_BYTES + 1)
        if len(raw) > _MAX_BYTES:
            raise KnownDifferencesError(f"{path} is over {_MAX_BYTES} bytes: a known-differences list is a few reviewed entries.")
        data = tomllib.loads(raw.decode("utf-8"))
    except OSError as err:
        raise KnownDifferencesError(f"cannot read {path}: {err.strerror or err}.") from err
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise KnownDifferencesError(f"{path} is not valid TOML ({err}).") from err
    entries = data.get("difference", [])
    if not isinstance(entries, list):
        raise KnownDifferencesError(f"{path}: `difference` must be an array of tables ([[difference]]).")
    known = tuple(_entry(path, k, entry) for k, entry in enumerate(entries))
    ids = [k.id for k in known]
    if len(set(ids)) != len(ids):
        raise KnownDifferencesError(f"{path}: entry ids must be unique, got {sorted(i for i in set(ids) if ids.count(i) > 1)}.")
    return known


def _entry(path: Path, index: int, data: Any) -> KnownDifference:
    where = f"{path}: difference {index + 1}"
    if not isinstance(data, Mapping):
        raise KnownDifferencesError(f"{where} is not a table.")
    where = f"{path}: difference {data.get('id', index + 1)!r}"

    def text(name: str, table: Mapping[str, Any] = data) -> str:
        value = table.get(name)
        if not isinstance(value, str) or not value.strip():
            raise KnownDifferencesError(f"{where}: `{name}` must be a non-empty string, got {value!r}.")
        return value.strip()

    def texts(name: str) -> tuple[str, ...]:
        value = data.get(name)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
            raise KnownDifferencesError(f"{where}: `{name}` must be a non-empty list of strings, got {value!r}.")
        return tuple(value)

    frontends = texts("frontends")
    if len(frontends) != 2:
        raise KnownDifferencesError(f"{where}: `frontends` must name two frontends (baseline first), got {list(frontends)}.")
    trigger = text("trigger")
    if trigger not in TRIGGERS:
        raise KnownDifferencesError(f"{where}: `trigger` must be one of {sorted(TRIGGERS)}, got {trigger!r}.")
    signature = data.get("signature")
    if not isinstance(signature, Mapping):
        raise KnownDifferencesError(f"{where}: `[difference.signature]` is missing.")
    first_step = signature.get("first_step")
    if not (first_step == "trigger" or (isinstance(first_step, list) and all(isinstance(s, int) and s >= 0 for s in first_step))):
        raise KnownDifferencesError(f"{where}: `signature.first_step` must be \"trigger\" or a list of steps, got {first_step!r}.")
    distance = signature.get("max_distance")
    if isinstance(distance, bool) or not isinstance(distance, int) or distance < 0:
        raise KnownDifferencesError(f"{where}: `signature.max_distance` must be a whole number >= 0, got {distance!r}.")
    return KnownDifference(
        id=text("id"), title=text("title"), pairs=texts("pairs"), devices=texts("devices"), frontends=(frontends[0], frontends[1]),
        trigger=trigger, seen_on=texts("seen_on"),
        signature=Signature(text("first_point", signature), "trigger" if first_step == "trigger" else tuple(first_step), distance),
        mechanism=text("mechanism"), sources=texts("sources"), upstream=text("upstream"),
    )
