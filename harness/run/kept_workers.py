"""Workers kept across runs: a pool lends them and takes them back, instead of starting and stopping its own.

A worker's start is R's start-up and ``library(torch)``, or Python's ``import torch``: 2.4 s for the pair on 2 CPU cores,
and stopping it another 0.7 s, against 0.2-0.4 s for the few cells a planted test runs. The test suite built a runner per
planted copy of the scripts (about 130 of them), so most of its time went into starting and stopping workers that then
ran a handful of cells. A :class:`KeptWorkers` keeps them alive between runners: each pool that is given one takes its
workers from it and gives them back when it closes, and the worker follows the scripts root its new run names (the
``scripts_root`` request: :mod:`harness.worker_side.python_handler`, :mod:`harness.worker_side.r_handler`).

A worker is lent only to a run that would have started the same one: the same frontend and the same environment (every
variable the child would get, but the scripts root, which it follows, and ``TMPDIR``, which is the keeper's). A run whose
environment differs in anything else gets a worker of its own, kept beside the first.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from harness.contract.requests import FOLLOW_REQUEST
from harness.errors import WorkerError
from harness.files.paths import SCRIPTS_ENV
from harness.files.staging import StagingDir
from harness.run.frontends import Frontend, open_worker
from harness.run.worker import Worker

__all__ = ["FOLLOWED_ENV", "KeptWorkers"]

#: How long a worker may take to follow another scripts root where the run names no timeout: R sources its dozen shared
#: files again (byte code from the cache: well under a second).
DEFAULT_FOLLOW_TIMEOUT_S = 60.0

#: What a kept worker may differ in from the run it is lent to: the scripts root (the worker follows it: a
#: ``scripts_root`` request) and its temporary folder (the keeper's, alive as long as its workers are).
FOLLOWED_ENV = (SCRIPTS_ENV, "TMPDIR")

#: The workers' temporary folders ($TMPDIR), one per keeper, removed when it closes (a killed session's are swept by the next).
KEPT_TMP_PREFIX = "amp-parity-kept-tmp-"

_Key = tuple[str, str, str, tuple[tuple[str, str], ...]]


class KeptWorkers:
    """Idle workers by frontend and environment; :meth:`close` stops them all.

    Thread-safe: a runner's frontends lend and return from threads of their own.
    """

    def __init__(self) -> None:
        self._tmp = StagingDir(Path(tempfile.gettempdir()), KEPT_TMP_PREFIX)
        self._idle: dict[_Key, list[Worker]] = {}
        #: Each worker lent, by identity, with its kind: where it goes back.
        self._kinds: dict[int, _Key] = {}
        #: The scripts root each worker follows, by identity.
        self._roots: dict[int, Path] = {}
        self._lock = threading.Lock()
        self._closed = False
        #: Workers lent, and workers started for a lending (a new one when none of its kind was idle).
        self.lent = 0
        self.started = 0

    @property
    def tmp(self) -> Path:
        """The kept workers' temporary folder ($TMPDIR): it lives as long as they do, not as long as a pool."""
        return self._tmp.path

    def take(self, frontend: Frontend, env: Mapping[str, str | None], timeout: float | None, root: Path) -> Worker:
        """An idle worker of ``frontend`` started with ``env`` (but :data:`FOLLOWED_ENV`), now following the scripts under
        ``root``; else a new one (not yet started: it starts on ``root``, the scripts root of this process's environment).

        A worker that fails to follow ``root`` (a copy of the scripts that R cannot source) is stopped and a new one
        takes its place: its start then fails as a run of its own would, with the same error.
        """
        key = _key(frontend, env)
        with self._lock:
            if self._closed:
                raise RuntimeError("KeptWorkers is closed: no worker is lent")
            idle = self._idle.get(key, [])
            worker = idle.pop() if idle else None
            self.lent += 1
            self.started += worker is None
        if worker is not None and self._roots.get(id(worker)) != root:
            try:
                worker.call({"kind": FOLLOW_REQUEST, "root": str(root)}, timeout=timeout or DEFAULT_FOLLOW_TIMEOUT_S)
            except WorkerError:
                worker.close()
                worker = None
        if worker is None:
            worker = open_worker(frontend, {**env, "TMPDIR": str(self.tmp)}, timeout=timeout)
        with self._lock:
            self._kinds[id(worker)] = key
            self._roots[id(worker)] = root
        return worker

    def give_back(self, worker: Worker) -> None:
        """Keep ``worker`` for the next run of its kind (one that died or cannot start is stopped instead)."""
        with self._lock:
            key = self._kinds.pop(id(worker), None)
            keep = not self._closed and key is not None and worker.alive and worker.cannot_start is None
            if keep and key is not None:
                self._idle.setdefault(key, []).append(worker)
            else:
                self._roots.pop(id(worker), None)
        if not keep:
            worker.close()

    def close(self) -> None:
        """Stop every idle worker (side by side) and remove their temporary folder."""
        with self._lock:
            self._closed = True
            workers = [w for idle in self._idle.values() for w in idle]
            self._idle.clear()
        for worker in workers:
            worker.ask_to_stop()
        for worker in workers:
            worker.close()
        self._tmp.close()

    def __enter__(self) -> KeptWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _key(frontend: Frontend, env: Mapping[str, str | None]) -> _Key:
    """What a lent worker must share with the run: its frontend (name, handler, installation) and every variable its child
    would get but :data:`FOLLOWED_ENV`."""
    effective = {**os.environ, **env}
    return frontend.name, frontend.handler, repr(frontend.installation), tuple(sorted((k, v) for k, v in effective.items()
                                                          if v is not None and k not in FOLLOWED_ENV))
