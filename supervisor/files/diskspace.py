"""Is a disk full? A full disk kills agents through no fault of theirs (their logs, the store)."""

from __future__ import annotations

import os
from pathlib import Path

DISK_LOW_BYTES = 1 << 20
"""Below this much free space a filesystem counts as full: a crash there is the disk's doing."""


def low_on_space(*paths: Path) -> bool:
    """True when any of the filesystems holding `paths` has less than DISK_LOW_BYTES free."""
    for path in paths:
        try:
            info = os.statvfs(path)
        except OSError:
            continue
        if info.f_bavail * info.f_frsize < DISK_LOW_BYTES:
            return True
    return False
