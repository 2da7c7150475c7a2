"""The options several commands share (judging, known differences, frontends) and what they mean once parsed.

``run`` and ``trace`` pair installations and judge them; ``report`` and ``merge`` judge stored results again. Each
option is declared once here, so its help and its reading are the same wherever it appears.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from harness.judge.known_differences import KnownDifference
    from harness.views.page import EntryText
    from harness.workload.installations import Installation
    from harness.workload.spec import WorkloadSpec

__all__ = ["Matrix", "add_frontend_arguments", "add_judging_arguments", "add_known_differences_argument",
           "add_rejudging_arguments", "entry_texts_of", "frontends_of", "known_differences_of", "matrix_of", "rejudging_of"]


def add_judging_arguments(parser: argparse.ArgumentParser) -> None:
    """``--no-scaler-lift`` and ``--known-differences``: what ``run`` and ``trace`` share about how cells run and pairs are judged."""
    from harness.run.prepare import add_scaler_lift_argument

    add_scaler_lift_argument(parser)
    add_known_differences_argument(parser)


def add_known_differences_argument(parser: argparse.ArgumentParser) -> None:
    """``--known-differences FILE``: the list every command that judges pairs is judged against."""
    from harness.workload.flags import path_argument

    parser.add_argument("--known-differences", type=path_argument, default=None, metavar="FILE",
                        help="judge against this known-differences list (default: harness/judge/known_differences.toml)")


def add_rejudging_arguments(parser: argparse.ArgumentParser, default: str) -> None:
    """``--[no-]tolerance-only`` and ``--known-differences``: how ``report`` and ``merge`` judge stored results again."""
    parser.add_argument("--tolerance-only", action=argparse.BooleanOptionalAction, default=None,
                        help=f"judge every pair by the tolerance (--no-tolerance-only: strictly); default: {default}")
    add_known_differences_argument(parser)


def rejudging_of(args: argparse.Namespace) -> str | None:
    """The judging policy ``--[no-]tolerance-only`` asks for, or ``None``: the stored result's own."""
    return None if args.tolerance_only is None else "tolerance_only" if args.tolerance_only else "strict"


def add_frontend_arguments(parser: argparse.ArgumentParser) -> None:
    """``--frontend``, ``--installations`` and ``--baseline``: which installations ``run`` and ``trace`` pair, and with which."""
    from harness.workload.flags import path_argument

    parser.add_argument("--frontend", action="append", default=None, metavar="NAME[=LANGUAGE[:PATH]]",
                        help="installations to run, in order (repeatable or comma-separated; default python,r): python, r, "
                             "a name from --installations, or NAME=python:/venv/bin/python, NAME=r:/R/library, "
                             "NAME=r:/bundle/activate.sh")
    parser.add_argument("--installations", type=path_argument, default=None, metavar="FILE",
                        help="a TOML file of named installations ([NAME] language, python, r_libs, activate, env)")
    parser.add_argument("--baseline", default=None, metavar="NAME",
                        help="the frontend every other is paired with (default: the first --frontend)")


def known_differences_of(args: argparse.Namespace) -> tuple[KnownDifference, ...] | None:
    """The known differences ``--known-differences FILE`` names (checked before any cell runs), or None: the committed list."""
    from harness.judge.known_differences import load_known_differences

    path = getattr(args, "known_differences", None)
    return None if path is None else load_known_differences(Path(path))


def frontends_of(args: argparse.Namespace) -> tuple[Installation, ...]:
    """The installations ``--frontend`` names (``--installations`` adds names), checked before anything runs.

    Raises:
        UsageError: an unknown name or language, a missing path, a bad installations file, a baseline not among them.
    """
    from harness.errors import UsageError
    from harness.workload.installations import load_installations, parse_frontends

    known = load_installations(args.installations) if args.installations is not None else None
    installations = parse_frontends(args.frontend, known)
    names = [i.name for i in installations]
    if args.baseline is not None and args.baseline not in names:
        raise UsageError("--baseline", args.baseline, f"one of the frontends run ({', '.join(names)})")
    return installations


def entry_texts_of(args: argparse.Namespace) -> dict[str, EntryText]:
    """The known differences the result was judged against, as the report's page shows them (views never judge)."""
    from harness.judge.known_differences import load_known_differences
    from harness.views.page import EntryText

    entries = known_differences_of(args) or load_known_differences()
    return {k.id: EntryText(k.id, k.kind, k.title, " ".join(k.mechanism.split()), k.sources, " ".join(k.upstream.split()))
            for k in entries}


class Matrix(NamedTuple):
    """What ``run`` and ``trace`` run: the spec, and the modes, optimizers, loop features and models of its cells."""

    spec: WorkloadSpec
    modes: tuple[str, ...]
    optimizers: tuple[str, ...]
    features: tuple[str, ...]
    models: tuple[str, ...]


def matrix_of(args: argparse.Namespace) -> Matrix:
    """The spec and the cells' axes the flags ask for, each checked before anything runs; a run narrowed to some modes or
    optimizers runs the plain loop unless ``--feature`` says otherwise.

    Raises:
        SpecError, UsageError: a value the spec, or an axis, does not allow.
    """
    from harness.contract.models import DEFAULT_MODEL
    from harness.workload.features import parse_features
    from harness.workload.flags import for_optimizers, spec_from_args
    from harness.workload.model_designs import parse_models
    from harness.workload.optimizers import parse_optimizers
    from harness.workload.spec import parse_modes

    asked_models = getattr(args, "model", None)  # a list here (--model transformer,gru, all), one model in the spec
    spec = spec_from_args(argparse.Namespace(**{**vars(args), "model": None}))
    modes = parse_modes(args.mode)
    optimizers = parse_optimizers(args.optimizer, spec.preset)
    spec = for_optimizers(spec, args, optimizers)
    narrowed = bool(args.optimizer or args.mode)
    features = parse_features(args.feature, spec.preset, narrowed=narrowed)
    models = parse_models([asked_models] if asked_models else None, spec.preset, narrowed, spec.model)
    # The spec names the MLP where it is among them (its ids and digest as they always were), else the first model.
    spec = spec.for_model(DEFAULT_MODEL if DEFAULT_MODEL in models else models[0])
    _refuse_empty_features(args, spec.device, modes, optimizers, features)
    _refuse_empty_models(asked_models, spec.device, modes, optimizers, features, models)
    return Matrix(spec, modes, optimizers, features, models)


def _refuse_empty_models(asked: str | None, device: str, modes: tuple[str, ...], optimizers: tuple[str, ...],
                         features: tuple[str, ...], models: tuple[str, ...]) -> None:
    """Refuse a model named in ``--model`` that has no cell in the asked modes and optimizers (its covering design runs
    elsewhere): asked for, it would never run. ``all`` (or the preset's) asks for each model where it runs.

    Raises:
        UsageError: naming the model, its design's optimizers, and the flags that left it out.
    """
    from harness.errors import UsageError
    from harness.workload.matrix import cells_for
    from harness.workload.model_designs import design_cells

    if not asked or "all" in asked.split(",") or len(models) < 2:
        return
    ran = {c.model for c in cells_for(("any",), modes, optimizers, device, features, models)}
    empty = [m for m in models if m not in ran]
    if empty:
        used = sorted({o for _, _, _, o in design_cells(empty[0])})
        raise UsageError("--model", empty[0], f"a model with a cell in the asked modes and optimizers; beside other models, "
                         f"{empty[0]} trains with {', '.join(used)} in every mode (harness/workload/model_designs.py): add one "
                         f"of them to --optimizer, or run {empty[0]} alone (--model {empty[0]}: its whole matrix)")


def _refuse_empty_features(args: argparse.Namespace, device: str, modes: tuple[str, ...], optimizers: tuple[str, ...],
                           features: tuple[str, ...]) -> None:
    """Refuse, before anything starts, a matrix of no cell (``--optimizer sgd --feature resume``: it wrote a result and a
    report of nothing and exited 0) and a feature named in ``--feature`` that adds no cell to it (asked for, never run).
    ``--feature all`` asks for every feature where it runs: one that runs in none of the asked cells is not refused.

    Raises:
        UsageError: naming the feature, where its covering design runs it, and the flags that left it out.
    """
    from harness.errors import UsageError
    from harness.workload.features import FEATURES, NO_FEATURE
    from harness.workload.matrix import cells_for

    every = features == (NO_FEATURE, *FEATURES)
    empty = [f for f in features if f != NO_FEATURE and not cells_for(("any",), modes, optimizers, device, (f,))]
    if not empty or (every and len(empty) < len(features)):
        return
    row = FEATURES[empty[0]]
    ran_modes = sorted({mode for cover in row.covers for _, mode in cover.modes})
    ran_optimizers = list(dict.fromkeys(o for cover in row.covers for o in cover.optimizers))
    asked = " ".join(f"--{flag} {','.join(values)}" for flag, values, given in (("mode", modes, args.mode),
                                                                               ("optimizer", optimizers, args.optimizer)) if given)
    raise UsageError(
        "--feature", empty[0],
        f"a loop feature that runs in at least one asked cell; {empty[0]}'s covering design runs it in the modes "
        f"{', '.join(ran_modes)} with the optimizers {', '.join(ran_optimizers)}, and {asked or 'this run'} asks for none of "
        f"those cells (harness/workload/features.py). Add one of them to --mode/--optimizer, or leave {empty[0]} out",
    )
