"""Workers kept across runs: a pool lends them and takes them back, instead of starting and stopping its own.

A worker's start is R's start-up and ``library(torch)``, or Python's ``import torch``: 2.4 s for the pair on 2 CPU cores,
and stopping it another 0.7 s, against 0.2-0.4 s for the few cells a planted test runs. The test suite built a runner per
planted copy of the scripts (about 130 of them), so most of its time went into starting and stopping workers that then
ran a handful of cells. A :class:`KeptWorkers` keeps them alive between runners: each pool that is given one takes its
workers from it and gives them back when it closes, and the worker follows the scripts root its new run names (the
``scripts_root`` request: :mod:`harness.worker_side.python_handler`, :mod:`harness.worker_side.r_handler`).

A worker is lent only to a run that would have started the same one: the same frontend and the same environment (every
variable the child would get, but the scripts root, which it follows, ``TMPDIR``, which is the keeper's, and what no worker
reads: :data:`UNREAD_ENV`). A run whose environment differs in anything else gets a worker of its own, kept beside the first,
and at most :data:`MAX_IDLE` idle workers are kept.
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

__all__ = ["FOLLOWED_ENV", "MAX_IDLE", "UNREAD_ENV", "KeptWorkers"]

#: How long a worker may take to follow another scripts root where the run names no timeout: R sources its dozen shared
#: files again (byte code from the cache: well under a second).
DEFAULT_FOLLOW_TIMEOUT_S = 60.0

#: What a kept worker may differ in from the run it is lent to: the scripts root (the worker follows it: a
#: ``scripts_root`` request) and its temporary folder (the keeper's, alive as long as its workers are).
FOLLOWED_ENV = (SCRIPTS_ENV, "TMPDIR")

#: What differs from test to test without reaching a worker: pytest names the running test in ``PYTEST_CURRENT_TEST``. In the
#: key, it gave every test a worker pair of its own, never lent again: 40 idle pairs in one pytest process, 350-750 MB each.
UNREAD_ENV = ("PYTEST_CURRENT_TEST",)

#: At most this many idle workers are kept (the oldest is stopped first): a kind of worker no run asks for again must not
#: hold its memory for the rest of the session. Four kinds in use at a time is the test suite's most (python and r, at
#: the tiny spec's threads and at the module sweep's).
MAX_IDLE = 6

#: The workers' temporary folders ($TMPDIR), one per keeper, removed when it closes (a killed session's are swept by the next).
KEPT_TMP_PREFIX = "amp-parity-kept-tmp-"

_Key = tuple[str, str, str, tuple[tuple[str, str], ...]]


class KeptWorkers:
    """Idle workers by frontend and environment; :meth:`close` stops them all.

    Thread-safe: a runner's frontends lend and return from threads of their own.
    """

    def __init__(self) -> None:
        self._tmp = StagingDir(Path(tempfile.gettempdir()), KEPT_TMP_PREFIX)
        #: The idle workers, oldest first (:data:`MAX_IDLE`), each with its kind and the scripts root it follows.
        self._idle: list[tuple[_Key, Path, Worker]] = []
        #: Each worker lent, by identity, with its kind and root: where it goes back.
        self._lent: dict[int, tuple[_Key, Path]] = {}
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
            found = next((k for k in range(len(self._idle) - 1, -1, -1) if self._idle[k][0] == key), None)
            _, followed, worker = self._idle.pop(found) if found is not None else (key, root, None)
            self.lent += 1
            self.started += worker is None
        if worker is not None and followed != root:
            try:
                worker.call({"kind": FOLLOW_REQUEST, "root": str(root)}, timeout=timeout or DEFAULT_FOLLOW_TIMEOUT_S)
            except WorkerError:
                worker.close()
                worker = None
        if worker is None:
            worker = open_worker(frontend, {**env, "TMPDIR": str(self.tmp)}, timeout=timeout)
        with self._lock:
            self._lent[id(worker)] = (key, root)
        return worker

    def give_back(self, worker: Worker) -> None:
        """Keep ``worker`` for the next run of its kind (one that died or cannot start is stopped instead)."""
        with self._lock:
            lent = self._lent.pop(id(worker), None)
            stopped = [worker]
            if lent is not None and not self._closed and worker.alive and worker.cannot_start is None:
                self._idle.append((*lent, worker))
                stopped = [w for _, _, w in self._idle[:-MAX_IDLE]]
                del self._idle[:-MAX_IDLE]
        for gone in stopped:
            gone.close()

    def close(self) -> None:
        """Stop every idle worker (side by side) and remove their temporary folder."""
        with self._lock:
            self._closed = True
            workers = [w for _, _, w in self._idle]
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
                                                          if v is not None and k not in FOLLOWED_ENV + UNREAD_ENV))
