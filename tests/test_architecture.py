"""Rules of the code base that a test can hold: every public exception class hivemesh defines
derives from :class:`hivemesh.errors.HivemeshError`. (The import layers are checked by
``make lint`` with import-linter.)"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import hivemesh
from hivemesh.errors import HivemeshError


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(hivemesh.__path__, "hivemesh."):
        if ".migrations" in info.name:
            continue
        names.append(info.name)
    return names


def test_every_public_exception_derives_from_hivemesh_error() -> None:
    found, stray = [], []
    for name in _modules():
        module = importlib.import_module(name)
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != name or cls_name.startswith("_") or not issubclass(cls, BaseException):
                continue
            if cls_name == "NotPushable":  # control flow inside the partition filter compiler
                continue
            found.append(f"{name}.{cls_name}")
            if not issubclass(cls, HivemeshError):
                stray.append(f"{name}.{cls_name}")
    assert len(found) >= 15
    assert stray == []


def test_make_clean_never_deletes_user_data(tmp_path: Path) -> None:
    """``make clean`` is a build target: it removes the virtualenv and caches, never
    ``hivemesh-data/`` (the default metastore's catalog and warehouse live there)."""
    import shutil
    import subprocess

    make = shutil.which("make")
    assert make is not None, "make is a set-up command of the README"
    root = Path(__file__).resolve().parents[1]
    dry = subprocess.run(
        [make, "-n", "-C", str(root), "clean"], capture_output=True, text=True, check=True
    ).stdout
    assert "rm -rf" in dry
    commands = [line.split("#", 1)[0] for line in dry.splitlines()]
    assert not any("hivemesh-data" in c for c in commands), dry
