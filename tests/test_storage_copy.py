"""Copying by content (``hivemesh.storage.copy``) on the local file system through pyarrow.fs."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from hivemesh.storage.copy import CopyResult, checksum, copy_file, list_tree, sync_tree


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_sync_copies_new_and_changed_files_only(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "p=1").mkdir(parents=True)
    (src / "a.orc").write_bytes(b"a" * 100)
    (src / "p=1" / "b.orc").write_bytes(b"bbb")
    first = sync_tree(f"file:{src}", f"file:{dst}")
    assert first == CopyResult(copied=2, bytes_copied=103, unchanged=0, deleted=0)
    assert _tree(dst) == _tree(src)

    # nothing changed: nothing copied
    assert sync_tree(f"file:{src}", f"file:{dst}") == CopyResult(0, 0, 2, 0)
    # a flipped byte (same size) is found by the checksum, a longer file by its size
    (dst / "a.orc").write_bytes(b"a" * 99 + b"X")
    (src / "p=1" / "b.orc").write_bytes(b"bbbb")
    again = sync_tree(f"file:{src}", f"file:{dst}")
    assert (again.copied, again.bytes_copied, again.unchanged) == (2, 104, 0)
    assert _tree(dst) == _tree(src)
    # without checksums a same-size difference goes unnoticed (the cheap mode)
    (dst / "a.orc").write_bytes(b"a" * 99 + b"Y")
    assert sync_tree(f"file:{src}", f"file:{dst}", verify_checksums=False).copied == 0


def test_sync_deletes_extra_files_only_when_asked(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "keep").write_bytes(b"k")
    (dst / "old").mkdir(parents=True)
    (dst / "old" / "gone").write_bytes(b"g")
    assert sync_tree(f"file:{src}", f"file:{dst}").deleted == 0
    assert (dst / "old" / "gone").exists()
    assert sync_tree(f"file:{src}", f"file:{dst}", delete_extra=True) == CopyResult(0, 0, 1, 1)
    assert _tree(dst) == {"keep": b"k"}


def test_copy_leaves_no_temporary_file_and_keeps_the_target_on_failure(tmp_path: Path) -> None:
    fs = pafs.LocalFileSystem()
    (tmp_path / "s").write_bytes(b"new content")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"old")
    assert copy_file(fs, str(tmp_path / "s"), fs, str(tmp_path / "d" / "f")) == 11
    assert os.listdir(tmp_path / "d") == ["f"] and (tmp_path / "d" / "f").read_bytes() == b"new content"
    # a source that cannot be read: the error names it, the target file is untouched, no temporary left
    with pytest.raises(OSError):
        copy_file(fs, str(tmp_path / "missing"), fs, str(tmp_path / "d" / "f"))
    assert os.listdir(tmp_path / "d") == ["f"] and (tmp_path / "d" / "f").read_bytes() == b"new content"


def test_listing_skips_temporary_copies_and_checksum_is_md5(tmp_path: Path) -> None:
    fs = pafs.LocalFileSystem()
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "data").write_bytes(b"hello")
    (tmp_path / "x" / ".data.hivemesh-0123456789ab.tmp").write_bytes(b"partial")
    assert [f.path for f in list_tree(fs, str(tmp_path / "x"))] == ["data"]
    assert list(list_tree(fs, str(tmp_path / "nope"))) == []
    assert checksum(fs, str(tmp_path / "x" / "data")) == "5d41402abc4b2a76b9719d911017c592"
