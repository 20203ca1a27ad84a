"""Storage: a table location resolved to a file system (``pyarrow.fs``) and the directory
operations the metastore and the ACID writers need. Lower layers: :mod:`hivemesh.hive` only."""

from hivemesh.storage.locations import (
    delete_dir,
    exists,
    is_subdir,
    join_location,
    make_dirs,
    move_dir,
    normalize_location,
    quick_stats,
)

__all__ = [
    "delete_dir",
    "exists",
    "is_subdir",
    "join_location",
    "make_dirs",
    "move_dir",
    "normalize_location",
    "quick_stats",
]
