"""Helpers shared by the ACID tests."""

from __future__ import annotations

from pathlib import Path

from hivemesh.storage import resolve_location


def break_partition(location: str) -> None:
    """Replace a partition directory by a file: listing it fails (proves a partition is not read)."""
    path = Path(resolve_location(location)[1])
    for f in sorted(path.rglob("*"), reverse=True):
        f.unlink() if f.is_file() else f.rmdir()
    path.rmdir()
    path.write_text("not a directory")
