"""What explains a zone's notification events as the applier's own (pure, no servers): the event
windows of :class:`hivemesh.live.out_of_band.ApplyWindows`, and when the applier may use one
event id read earlier for a command's marker (:class:`hivemesh.live.applier._EventBase`)."""

from __future__ import annotations

import time

from hivemesh.live.applier import _FRESH_S, _EventBase
from hivemesh.live.out_of_band import ApplyWindows


def test_commands_sharing_one_event_id_keep_their_windows_open_together() -> None:
    w = ApplyWindows()
    w.open(10, ("db", ("a",)))
    w.open(10, ("db", ("b",)))  # the same id: both calls' events come after it
    assert w.explains(11, "db", "a") and w.explains(12, "db", "b")
    assert not w.explains(11, "db", "c")  # an out-of-band write on another table
    w.open(15, ("db", ("c",)))  # a new id closes both at 15
    assert w.explains(15, "db", "a") and not w.explains(16, "db", "a")
    assert w.explains(16, "db", "c")
    w.close(20)
    assert w.explains(20, "db", "c") and not w.explains(21, "db", "c")
    w.forget_before(20)
    assert not w.explains(16, "db", "c")


def test_an_unknown_event_id_closes_the_open_windows_at_their_start() -> None:
    w = ApplyWindows()
    w.open(10, ("db", ("a",)))
    w.open(10, ("db", ("b",)))
    w.open(None, ("db", ("c",)))
    assert not w.explains(11, "db", "a") and not w.explains(11, "db", "b")


def test_an_event_id_serves_commands_on_other_objects_only_while_fresh() -> None:
    base = _EventBase(7, time.monotonic(), {})
    assert base.fits(("db", ("a",)))
    base.add(("db", ("a",)))
    assert not base.fits(("db", ("a",)))  # a second command on table a: its events would mix
    assert base.fits(("db", ("b",))) and base.fits(("other", ("a",)))
    assert not base.fits(("db", ()))  # the database itself: every table's events are its
    assert not base.fits(None)  # objects unknown
    base.add(("other", ()))
    assert not base.fits(("other", ("z",)))
    stale = _EventBase(7, time.monotonic() - _FRESH_S - 0.01, {})
    assert not stale.fits(("db", ("a",)))
