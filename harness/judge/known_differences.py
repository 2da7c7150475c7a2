"""Known differences: the divergences between the bindings that are understood, each proven by reconciliation.

The list is data (``harness/judge/known_differences.toml``, reviewed like code; ``docs/known-differences.md``). An entry
names where it applies (two languages, in either order; scripts, modes, optimizers, devices), the signature its
difference shows in a pair's trace (the first differing point, at a step where its trigger holds or at listed steps,
within a distance; or, for a binding that crashes, the error it raises), the mechanism with the source lines on both
sides, where it stands upstream, and the **switch** that removes its mechanism on one side (a statement of that
binding's function computed as the other binding does it: :mod:`harness.workload.patches`). An entry may be an R torch
**bug**: then it also names a standalone reproducer in each language (run by a test: the entry goes stale when R torch
fixes it) and the report ready for mlverse/torch.

A match proves nothing about what comes after its first point. Judging (:mod:`harness.judge.pairs`) therefore asks three
questions: does a pair that is not identical have an applicable entry's signature (:meth:`KnownDifference.mismatch`),
and, where identity is expected, is the pair bitwise identical for the whole run once every applicable entry's switch is
on (reconciliation: then the entries explain the *whole* difference, whatever its size); and did an identical pair show
an entry's trigger (the entry is stale, like a strict xfail).

Every field is checked when the list is read, and an entry that cannot match anything is refused in one line naming
the list, the entry and the field: bounds are part of the data, not of the code that reads it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract.models import DEFAULT_MODEL, MODELS
from harness.contract.modes import SCRIPTS
from harness.errors import KnownDifferencesError
from harness.files.bounded_read import FileFormatError, FileSyntaxError, read_toml_file
from harness.files.paths import CHECKOUT
from harness.judge.divergence import TRIGGERS
from harness.model.pair_trace import PairTrace
from harness.model.result import CellResult
from harness.workload.features import FEATURES, NO_FEATURE, second_group_weight_decay
from harness.workload.installations import LANGUAGES
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.patches import SWITCHES
from harness.workload.spec import DEVICES

__all__ = ["DEFAULT_LIST", "KINDS", "MAX_DISTANCE", "KnownDifference", "Signature", "load_known_differences"]

#: The committed list.
DEFAULT_LIST = Path(__file__).with_name("known_differences.toml")
#: Bound on the list's size: it is a handful of reviewed entries, never a dump.
_MAX_BYTES = 1 << 20
#: ``difference``: two equally defensible computations; ``bug``: R torch computes a wrong result or fails (an entry
#: that must name a reproducer in each language and a report for mlverse/torch).
KINDS = ("difference", "bug")
#: The largest ``max_distance`` an entry may allow: a float32 point's ULP distance is below 2^32 (the whole range), so
#: a bound at or past it would allow any difference at all. An entry's bound is what it measured, rounded up, never
#: "anything": reconciliation, not the bound, is what proves an entry explains a difference.
MAX_DISTANCE = 2**32 - 1
#: The one pattern a first point may hold: ``{param}``, any parameter of the model as the trace names them: a dotted
#: name, as every model names its parameters (``layer0.weight``, ``encoder.self_attn.in_proj_weight``, ``conv1.bias``).
_PARAM = "{param}"
_PARAM_PATTERN = r"[A-Za-z_]\w*(?:\.\w+)*"
#: The trigger of a mechanism that acts at every step (:data:`harness.judge.divergence.TRIGGERS`).
_ALWAYS = "always"
#: A bug's reproducers and report live here, one folder per entry (``docs/bugs/<id>/``): in the project's checkout. An
#: installed harness has no docs (a wheel carries the package), so there the entries are taken as the checkout's tests
#: checked them (``tests/integration/test_bug_reproducers.py`` runs every reproducer).
BUGS_DIR = CHECKOUT / "docs" / "bugs" if CHECKOUT is not None else None


@dataclass(frozen=True)
class Signature:
    """What a pair's trace must show to be this difference: where it first parts, when, and how far; or the error one
    side raises (``error``, a regular expression its one-line reason matches) where the binding crashes."""

    #: The points it may first differ at (one mechanism shows first at another state of another optimizer): each a name,
    #: with ``{param}`` standing for one of the model's parameters.
    first_points: tuple[str, ...]
    #: ``"trigger"``: a step where the entry's trigger holds; otherwise the steps allowed.
    first_step: str | tuple[int, ...]
    max_distance: int
    error: str | None = None
    #: What differs there: ``bytes`` (the values), ``dtype`` (one side keeps the value in another dtype) or ``order`` (one
    #: side records a point where the other records the next: a gradient one side keeps, as zeros, and the other has none).
    kind: str = "bytes"

    @property
    def first_point(self) -> str:
        """The points, as messages name them."""
        return " or ".join(self.first_points)

    @functools.cached_property
    def point_pattern(self) -> re.Pattern[str]:
        """The first points as one pattern: the names themselves, ``{param}`` standing for one of the model's parameters."""
        return re.compile("^(?:" + "|".join(re.escape(p).replace(re.escape(_PARAM), _PARAM_PATTERN) for p in self.first_points) + ")$")


@dataclass(frozen=True)
class KnownDifference:
    """One entry of the list (its fields are documented at the top of ``known_differences.toml``)."""

    id: str
    kind: str
    title: str
    languages: frozenset[str]
    scripts: tuple[str, ...]
    modes: tuple[str, ...]
    optimizers: tuple[str, ...]
    devices: tuple[str, ...]
    trigger: str
    switches: tuple[str, ...]
    seen_on: tuple[str, ...]
    signature: Signature
    mechanism: str
    sources: tuple[str, ...]
    upstream: str
    #: The list it was read from (messages name it: the committed list as ``harness/judge/known_differences.toml``).
    source: str = "harness/judge/known_differences.toml"
    #: The optimizer arguments the mechanism needs nonzero (a weight-decay bug needs weight decay): with one at 0 the
    #: entry is inert there, neither matched nor stale.
    acts_only_with: tuple[str, ...] = ()

    def inert(self, args: Mapping[str, Any], feature: str = NO_FEATURE) -> str | None:
        """Why the entry cannot act on a run with the optimizer arguments ``args`` in the loop of ``feature`` (one it needs
        is 0), or ``None``. An argument ``args`` lacks is at both constructors' default, 0 for those an entry names (plain
        SGD's weight_decay: the row sets none, the search may draw one). A scheduler that cycles momentum (OneCycleLR)
        sets each group's momentum at every step, whatever the row gave: there momentum is never 0. A loop of two param
        groups gives the second its own weight decay (:func:`~harness.workload.features.second_group_weight_decay`):
        a weight-decay mechanism acts there where that one is not 0, whatever the row's."""
        row = FEATURES.get(feature)
        looped = {"momentum"} if row is not None and row.cycles_momentum else set()
        second = second_group_weight_decay(args) if row is not None and row.two_groups else None
        grouped = {"weight_decay"} if second else set()
        off = [a for a in self.acts_only_with
               if a not in looped | grouped and not isinstance(args.get(a, 0), bool) and args.get(a, 0) == 0]
        return f"{off[0]} = 0, so its mechanism cannot act" if off else None

    #: The loop features (harness/workload/features.py) it covers: ``None``, every one (the plain loop included), as an
    #: optimizer's mechanism acts whatever the loop; an entry about a feature's own mechanism names it.
    features: tuple[str, ...] | None = None
    #: The models (harness/contract/models.py) it covers: ``None``, every one, as an optimizer's or the loop's mechanism
    #: acts whatever the model; an entry about a model's own modules (its attention, its embedding, its loss) names it.
    models: tuple[str, ...] | None = None

    def switches_for(self, optimizer: str, language: str) -> tuple[str, ...]:
        """The entry's switches a run of ``optimizer`` in ``language``'s script applies (those of its side that patch a
        function that run calls)."""
        return tuple(s for s in self.switches if SWITCHES[s].side == language and SWITCHES[s].acts_on(optimizer))

    def covers(self, script: str, mode: str, optimizer: str, device: str, feature: str = NO_FEATURE,
               model: str = DEFAULT_MODEL) -> bool:
        """Whether the entry's scope holds this script × mode × optimizer × device (× loop feature × model)."""
        return (script in self.scripts and mode in self.modes and optimizer in self.optimizers and device in self.devices
                and (self.features is None or feature in self.features) and (self.models is None or model in self.models))

    def applies(self, a: CellResult, b: CellResult) -> bool:
        """Whether this entry covers the pair of ``a`` and ``b``: its scope, and the two sides' languages in either order
        (whatever the installations are named: R torch on any libtorch is covered)."""
        return (self.covers(a.script, a.mode, a.optimizer, a.device, a.feature, a.model)
                and frozenset((a.language, b.language)) == self.languages)

    def reconciling(self, cell: CellResult | Any, language: str) -> tuple[str, ...]:
        """The switches ``cell`` (of ``language``) runs in its reconciled run for this entry: none where the entry does not
        cover it (or nothing of the entry's mechanism is on its side)."""
        covered = self.covers(cell.script, cell.mode, cell.optimizer, cell.device, cell.feature, cell.model)
        return self.switches_for(cell.optimizer, language) if covered else ()

    def expected_switches(self, optimizer: str, languages: frozenset[str] | None = None) -> tuple[str, ...]:
        """Every switch this entry applies to a pair with ``optimizer``, on either side."""
        return tuple(s for s in self.switches if SWITCHES[s].acts_on(optimizer) and SWITCHES[s].side in (languages or self.languages))

    def trigger_steps(self, trace: PairTrace) -> tuple[int, ...]:
        """The steps at which the trace shows this entry's trigger (none: the difference has no reason to show)."""
        return tuple(trace.triggers.get(self.trigger, ()))

    def mismatch(self, trace: PairTrace, micro_batches: int = 1) -> str | None:
        """Why ``trace`` does not have this entry's signature, or ``None`` when it does.

        Listed steps count optimizer steps: in a loop that accumulates ``micro_batches`` per optimizer step (a loop
        feature, harness/workload/features.py) the traced step ``s`` is optimizer step ``s // micro_batches``."""
        first = trace.first_difference
        if trace.error is not None:
            return f"no trace ({trace.error})"
        if first is None:
            return "the trace shows no difference"
        if not self.signature.point_pattern.match(first.point):
            return f"it first differs at {first.point}, not {self.signature.first_point}"
        allowed = self.trigger_steps(trace) if self.signature.first_step == "trigger" else self.signature.first_step
        step = first.step if self.signature.first_step == "trigger" else first.step // micro_batches
        if step not in allowed:
            where = f"a step where {self.trigger} holds" if self.signature.first_step == "trigger" else f"steps {list(allowed)}"
            return f"it first differs at step {first.step}, not at {where}"
        if first.kind != self.signature.kind:
            return f"its first difference is of kind {first.kind!r}, not {self.signature.kind!r}"
        if first.max_distance is not None and first.max_distance > self.signature.max_distance:
            return f"its first difference is {first.max_distance} apart, beyond the entry's {self.signature.max_distance}"
        return None

    def error_mismatch(self, reason: str | None) -> str | None:
        """Why a cell's failure ``reason`` is not this entry's error, or ``None`` when it is (entries without one: never)."""
        if self.signature.error is None:
            return "the entry describes no error"
        if reason is None or not re.search(self.signature.error, reason):
            return f"the cell's error does not match {self.signature.error!r}"
        return None

    def lines(self) -> list[str]:
        """The entry as a pair's explanation shows it: what, why, where it stands upstream."""
        why = " ".join(self.mechanism.split())
        upstream = " ".join(self.upstream.split())
        label = "R torch bug" if self.kind == "bug" else "known difference"
        return [f"{label} {self.id}: {self.title}", f"  why: {why}", f"  upstream: {upstream}",
                *(f"  switch: {s} ({SWITCHES[s].title}, in the {SWITCHES[s].side} script)" for s in self.switches)]


@functools.lru_cache(maxsize=8)
def load_known_differences(path: Path = DEFAULT_LIST) -> tuple[KnownDifference, ...]:
    """The entries of a known-differences list, every field checked.

    Raises:
        KnownDifferencesError: one line naming the file, the entry and the field that is missing or wrong.
    """
    try:
        data = read_toml_file(path, _MAX_BYTES)
    except OSError as err:
        raise KnownDifferencesError(f"cannot read {path}: {err.strerror or err}.") from err
    except FileSyntaxError as err:
        raise KnownDifferencesError(f"{path} is not valid TOML ({err}).") from err
    except FileFormatError as err:
        raise KnownDifferencesError(f"{path} is not a file holding a known-differences list ({err}): pass a known-differences "
                                    "TOML file (see docs/known-differences.md).") from err
    unknown = sorted(set(data) - {"difference"})
    if unknown:
        raise KnownDifferencesError(f"{path}: unknown table {unknown[0]!r}; a list holds [[difference]] entries only.")
    entries = data.get("difference", [])
    if not isinstance(entries, list):
        raise KnownDifferencesError(f"{path}: `difference` must be an array of tables ([[difference]]).")
    known = tuple(_entry(path, k, entry) for k, entry in enumerate(entries))
    ids = [k.id for k in known]
    if len(set(ids)) != len(ids):
        raise KnownDifferencesError(f"{path}: entry ids must be unique, got {sorted(i for i in set(ids) if ids.count(i) > 1)}.")
    return known


#: Every field an entry may have (anything else is a typo, refused rather than ignored).
_FIELDS = frozenset({"id", "kind", "title", "languages", "scripts", "modes", "optimizers", "devices", "trigger", "switches",
                     "seen_on", "signature", "mechanism", "sources", "upstream", "acts_only_with", "features",
                     "models"})
_SIGNATURE_FIELDS = frozenset({"first_point", "first_step", "max_distance", "error", "kind"})
#: What a first difference may be (:class:`harness.judge.divergence.Split`): another value, or another dtype.
_SIGNATURE_KINDS = ("bytes", "dtype", "order")


def _shown(path: Path) -> str:
    """How messages name a list: the committed one by its path in the project, any other as given."""
    return "harness/judge/known_differences.toml" if path.resolve() == DEFAULT_LIST.resolve() else str(path)


def _entry(path: Path, index: int, data: Any) -> KnownDifference:
    where = f"{path}: difference {index + 1}"
    if not isinstance(data, Mapping):
        raise KnownDifferencesError(f"{where} is not a table.")
    where = f"{path}: difference {data.get('id', index + 1)!r}"

    def fail(field: str, value: object, expected: str) -> KnownDifferencesError:
        return KnownDifferencesError(f"{where}: `{field}` must be {expected}, got {value!r:.80}.")

    extra = sorted(set(data) - _FIELDS)
    if extra:
        raise fail(extra[0], data[extra[0]], f"one of the fields {', '.join(sorted(_FIELDS))} (not a field an entry has)")

    def text(name: str, table: Mapping[str, Any] = data) -> str:
        value = table.get(name)
        if not isinstance(value, str) or not value.strip():
            raise fail(name, value, "a non-empty string")
        return value.strip()

    def texts(name: str, allowed: tuple[str, ...] | None = None, table: Mapping[str, Any] = data) -> tuple[str, ...]:
        value = table.get(name)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
            raise fail(name, value, "a non-empty list of strings")
        if allowed is not None:
            for item in value:
                if item not in allowed:
                    raise fail(name, item, f"one of {', '.join(allowed)}")
        if len(set(value)) != len(value):
            raise fail(name, value, "a list without repeats")
        return tuple(value)

    kind = text("kind")
    if kind not in KINDS:
        raise fail("kind", kind, f"one of {', '.join(KINDS)}")
    languages = texts("languages", LANGUAGES)
    if len(languages) != 2:
        raise fail("languages", list(languages), "the two languages of the pair (e.g. [\"python\", \"r\"]), in either order")
    scripts = texts("scripts", tuple(SCRIPTS))
    declared = tuple(dict.fromkeys(m for s in scripts for m in SCRIPTS[s].mode_names))
    modes = texts("modes", declared)
    optimizers = data.get("optimizers")
    optimizers = tuple(OPTIMIZERS) if optimizers == "all" else texts("optimizers", tuple(OPTIMIZERS))
    devices = texts("devices", DEVICES)
    trigger = text("trigger")
    if trigger not in TRIGGERS:
        raise fail("trigger", trigger, f"one of {', '.join(sorted(TRIGGERS))}")
    switches = texts("switches")
    for switch in switches:
        if switch not in SWITCHES:
            raise fail("switches", switch, f"a switch of harness/workload/patches.toml: {', '.join(SWITCHES) or 'none defined'}")
        if SWITCHES[switch].side not in languages:
            raise fail("switches", switch, f"a switch of one of the entry's languages ({SWITCHES[switch].side} is not one of them)")
    unswitched = [o for o in optimizers if not any(SWITCHES[s].acts_on(o) for s in switches)]
    if unswitched:
        raise fail("switches", list(switches), f"switches of which one acts on every optimizer the entry covers (none acts on "
                   f"{unswitched[0]}: its difference could never be proven)")
    acts_only_with: tuple[str, ...] = ()
    if "acts_only_with" in data:
        acts_only_with = texts("acts_only_with")
        for arg in acts_only_with:
            lacking = [o for o in optimizers if arg not in OPTIMIZERS[o].args and arg not in OPTIMIZERS[o].space]
            if lacking:
                raise fail("acts_only_with", arg, f"an argument of every optimizer the entry covers, set by its row or in its "
                                                  f"space ({lacking[0]} has none)")
    signature = _signature(data.get("signature"), where, trigger)
    entry = KnownDifference(
        id=text("id"), kind=kind, title=text("title"), languages=frozenset(languages), scripts=scripts, modes=modes,
        optimizers=optimizers, devices=devices, trigger=trigger, switches=switches, seen_on=texts("seen_on"), signature=signature,
        mechanism=text("mechanism"), sources=texts("sources"), upstream=text("upstream"), source=_shown(path),
        acts_only_with=acts_only_with,
        features=None if data.get("features") is None else texts("features", tuple(FEATURES)),
        models=None if data.get("models") is None else texts("models", tuple(MODELS)),
    )
    if kind == "bug" and BUGS_DIR is not None:
        missing = [name for name in ("reproducer.R", "reproducer.py", "report.md") if not (BUGS_DIR / entry.id / name).is_file()]
        if missing:
            raise KnownDifferencesError(f"{where}: a bug entry needs docs/bugs/{entry.id}/{missing[0]} (its reproducers in R and "
                                        "Python, run by a test, and the report for mlverse/torch).")
    return entry


def _signature(data: Any, where: str, trigger: str) -> Signature:
    if not isinstance(data, Mapping):
        raise KnownDifferencesError(f"{where}: `[difference.signature]` is missing.")
    extra = sorted(set(data) - _SIGNATURE_FIELDS)
    if extra:
        raise KnownDifferencesError(f"{where}: `signature.{extra[0]}` is not a signature field ({', '.join(sorted(_SIGNATURE_FIELDS))}).")
    points = data.get("first_point")
    points = [points] if isinstance(points, str) else points
    name = r"[A-Za-z0-9_.]+(\{param\}[A-Za-z0-9_.]*)?"
    if not isinstance(points, list) or not 1 <= len(points) <= 8 or not all(isinstance(p, str) and re.fullmatch(name, p) for p in points):
        raise KnownDifferencesError(f"{where}: `signature.first_point` must be a point's name, or a list of 1 to 8, each with at most "
                                    f"one {_PARAM} for any parameter (no other pattern), got {data.get('first_point')!r:.80}.")
    kind = data.get("kind", "bytes")
    if kind not in _SIGNATURE_KINDS:
        raise KnownDifferencesError(f"{where}: `signature.kind` must be one of {', '.join(_SIGNATURE_KINDS)}, got {kind!r:.80}.")
    step = data.get("first_step")
    steps_ok = isinstance(step, list) and 0 < len(step) <= 64 and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                                       for s in step)
    if not (step == "trigger" or steps_ok):
        raise KnownDifferencesError(f"{where}: `signature.first_step` must be \"trigger\" or a list of 1 to 64 steps, got {step!r:.80}.")
    if step == "trigger" and trigger == _ALWAYS:
        raise KnownDifferencesError(f"{where}: `signature.first_step` \"trigger\" with trigger \"always\" allows every step: "
                                    "list the steps it was seen at.")
    distance = data.get("max_distance")
    if isinstance(distance, bool) or not isinstance(distance, int) or not 0 <= distance <= MAX_DISTANCE:
        raise KnownDifferencesError(f"{where}: `signature.max_distance` must be a whole number from 0 to {MAX_DISTANCE} (what was "
                                    f"measured, rounded up), got {distance!r:.80}.")
    error = data.get("error")
    if error is not None:
        if not isinstance(error, str) or not error.strip():
            raise KnownDifferencesError(f"{where}: `signature.error` must be a non-empty regular expression, got {error!r:.80}.")
        try:
            re.compile(error)
        except re.error as err:
            raise KnownDifferencesError(f"{where}: `signature.error` is not a regular expression ({err}).") from err
    return Signature(tuple(points), "trigger" if step == "trigger" else tuple(int(s) for s in step or ()), distance, error, kind)

