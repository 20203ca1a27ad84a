"""The live applier's state file (:class:`hivemesh.live.state.StateFile`): two checksummed slots
written in turn, so the newest complete save is what a restart reads, whatever a crash tore."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hivemesh.live.state import StateFile


def test_saves_read_back_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "state" / "z1.json"
    assert StateFile(path).load() is None
    f = StateFile(path)
    for i in range(1, 6):
        f.save({"position": i, "applying": i + 1})
        assert StateFile(path).load() == {"position": i, "applying": i + 1}
    size = path.stat().st_size
    f.close()
    g = StateFile(path)  # a restarted process goes on where the file is
    g.save({"position": 6})
    g.save({"position": 7})
    assert StateFile(path).load() == {"position": 7}
    assert path.stat().st_size == size  # saves overwrite slots: the file never grows for small states


def test_a_torn_save_leaves_the_state_before_it(tmp_path: Path) -> None:
    path = tmp_path / "z1.json"
    f = StateFile(path)
    f.save({"position": 1})
    f.save({"position": 2})
    f.close()
    raw = bytearray(path.read_bytes())
    slot = len(raw) // 2
    newest = -1
    for offset in (0, slot):  # the slot holding position 2: tear its JSON (a crash mid-write)
        if b'"position": 2' in raw[offset : offset + slot]:
            newest = offset
    assert newest >= 0
    raw[newest + 30] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert StateFile(path).load() == {"position": 1}
    h = StateFile(path)
    h.save({"position": 3})  # and the next save goes over the torn slot, not over the good one
    assert StateFile(path).load() == {"position": 3}


def test_the_earlier_plain_json_format_is_read_and_converted(tmp_path: Path) -> None:
    path = tmp_path / "z1.json"
    path.write_text(json.dumps({"position": 41, "applying": 42, "event_id": 7}))
    f = StateFile(path)
    assert f.load() == {"position": 41, "applying": 42, "event_id": 7}
    f.save({"position": 42})
    assert not path.read_bytes().startswith(b"{")
    assert StateFile(path).load() == {"position": 42}


def test_a_state_larger_than_a_slot_gets_larger_slots(tmp_path: Path) -> None:
    path = tmp_path / "z1.json"
    f = StateFile(path)
    f.save({"position": 1})
    big = {"position": 2, "error": "x" * 100_000}
    f.save(big)
    assert StateFile(path).load() == big
    f.save({"position": 3})
    assert StateFile(path).load() == {"position": 3}


def test_a_file_not_written_by_hivemesh_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "z1.json"
    path.write_bytes(b"\x00garbage" * 5000)
    with pytest.raises(ValueError, match="not a live applier state"):
        StateFile(path).load()
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a live applier state"):
        StateFile(path).load()
