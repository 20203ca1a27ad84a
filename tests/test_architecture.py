"""Rules of the code base that a test can hold: every public exception class hivemesh defines
derives from :class:`hivemesh.errors.HivemeshError`. (The import layers are checked by
``make lint`` with import-linter.)"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

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
