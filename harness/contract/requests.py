"""The requests a worker answers beside its cells, where the parent and both handlers must spell them alike."""

from __future__ import annotations

__all__ = ["FOLLOW_REQUEST"]

#: ``{"kind": FOLLOW_REQUEST, "root": path}``: from now on, run the scripts under ``root`` (a folder holding ``py_scripts/``
#: and ``r_scripts/``): Python imports ``py_scripts`` anew from there, R sources its bridge and shared files anew from there.
#: What lets a kept worker (:mod:`harness.run.kept_workers`) serve the next run, on another copy of the scripts, without a
#: new start. A root the worker already follows costs nothing.
FOLLOW_REQUEST = "scripts_root"
