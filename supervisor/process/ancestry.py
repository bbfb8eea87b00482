"""The daemon's ancestors, read once per parent: no signal ever goes to one of them.

The check ran before every signal and walked the chain of parents through psutil (a process
object per level): ~2 ms on a loaded machine, once per run in a fleet's `herd down`.
"""

from __future__ import annotations

import os

import psutil

_cached: tuple[int, frozenset[int]] | None = None
"""(the parent PID when read, the ancestors' PIDs then)."""


def ancestor_pids() -> frozenset[int]:
    """PIDs of every ancestor of this process, read again whenever its parent changed.

    A new ancestor comes only with a new parent (an orphan goes to a reaper that already was
    an ancestor), so the set read under the same parent can only hold more, never fewer:
    an ancestor that died since is still refused, which is the safe side.
    """
    global _cached
    parent = os.getppid()
    cached = _cached
    if cached is not None and cached[0] == parent:
        return cached[1]
    try:
        pids = frozenset(proc.pid for proc in psutil.Process().parents())
    except psutil.Error:
        pids = frozenset()
    pids |= {parent}  # the parent at least, even when psutil could not read the chain
    _cached = (parent, pids)
    return pids
