"""Storage: a table location resolved to a file system (``pyarrow.fs``) and the file and directory
operations the metastore and the ACID readers and writers need (:mod:`hivemesh.storage.locations`),
copying by content for replication (:mod:`hivemesh.storage.copy`), and the SQL store base of
hivemesh's own databases (:mod:`hivemesh.storage.sql`). Lower layers: :mod:`hivemesh.hive` and
:mod:`hivemesh.config` only."""

from hivemesh.storage.locations import (
    delete_dir,
    delete_path,
    empty_dir,
    exists,
    is_subdir,
    join_location,
    list_dir,
    list_files,
    local_path,
    make_dirs,
    move_dir,
    normalize_location,
    path_exists,
    quick_stats,
    remove_path,
    resolve_location,
    same_location,
    write_file,
)

__all__ = [
    "delete_dir",
    "delete_path",
    "empty_dir",
    "exists",
    "is_subdir",
    "join_location",
    "list_dir",
    "list_files",
    "local_path",
    "make_dirs",
    "move_dir",
    "normalize_location",
    "path_exists",
    "quick_stats",
    "remove_path",
    "resolve_location",
    "same_location",
    "write_file",
]
