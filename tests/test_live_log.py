"""The Live Hive command log on a real 3-member etcd cluster (:mod:`hivemesh.live.log`,
:mod:`tests.support.etcd`): appends are idempotent by request id and totally ordered, readers and
followers see one sequence without gaps or repeats, and the log rides out a hung leader, a killed
and restarted leader and a lost quorum. Each test writes under a prefix of its own on the
session's cluster, and every fault is undone after the test (:meth:`EtcdCluster.heal`).

Without quorum, appends and linearizable reads fail with ``LogUnavailable`` within the timeout;
serializable reads still answer from a live member (committed entries, possibly behind).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

import pytest
import requests
from pydantic import ValidationError

from hivemesh.config import ConfigError, format_errors
from hivemesh.live import (
    CommandLog,
    CommandTooLarge,
    Entry,
    EtcdConfig,
    InvalidCommand,
    LogCompacted,
    LogFollower,
    LogRefused,
    LogUnavailable,
    RequestIdConflict,
)
from hivemesh.live.etcd import b64, prefix_end
from tests.support.etcd import EtcdCluster, require_etcd
from tests.support.servers import free_port
from tests.support.tls import make_pki

T = TypeVar("T")
RECOVERY_S = 20.0
"""Generous deadline of recovery from a fault (an election takes about a second here)."""


@pytest.fixture()
def cluster(etcd_cluster: EtcdCluster) -> Iterator[EtcdCluster]:
    """The session's etcd cluster, healed after the test (paused members resumed, killed ones
    restarted)."""
    try:
        yield etcd_cluster
    finally:
        etcd_cluster.heal()


@pytest.fixture()
def prefix() -> str:
    return f"/hivemesh-test/{uuid.uuid4().hex[:12]}"


def open_log(endpoints: list[str], prefix: str, timeout_s: float = 3.0, **extra: object) -> CommandLog:
    return CommandLog(EtcdConfig(endpoints=endpoints, prefix=prefix, timeout_s=timeout_s, **extra))  # type: ignore[arg-type]


class Background(Generic[T]):
    """``fn()`` running in a daemon thread; :meth:`result` waits for it."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._box: dict[str, object] = {}
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], T]) -> None:
        try:
            self._box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            self._box["error"] = e

    def result(self, seconds: float) -> T:
        """``fn``'s value (or its exception raised here); fails the test after ``seconds``."""
        self._thread.join(seconds)
        if self._thread.is_alive():
            pytest.fail(f"no result within {seconds:g} s")
        if "error" in self._box:
            raise self._box["error"]  # type: ignore[misc]
        return self._box["value"]  # type: ignore[return-value]


def within(seconds: float, fn: Callable[[], T]) -> T:
    """``fn()`` run in a thread; fails the test when it has not returned after ``seconds``."""
    return Background(fn).result(seconds)


def retry_until(deadline_s: float, fn: Callable[[], T]) -> T:
    """``fn()`` retried after LogUnavailable until it succeeds or ``deadline_s`` has passed."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return fn()
        except LogUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def ids(entries: list[Entry]) -> list[str]:
    return [e.request_id for e in entries]


def test_config_messages() -> None:
    cfg = EtcdConfig(endpoints=["http://127.0.0.1:2379/"])
    assert cfg.endpoints == ["http://127.0.0.1:2379"] and cfg.prefix == "/hivemesh/live"
    cases = [
        ({"endpoints": ["http://a:1", "etcd-b:2379", "http://a:1/"]},
         ["endpoints[1]: must be http://host:port or https://host:port", "endpoints[2]: http://a:1/ is also endpoints[0]"]),
        ({"endpoints": ["http://a:1", "https://b:2"]}, ["endpoints: mixes http:// and https://"]),
        ({"endpoints": ["http://a:1"], "tls_ca": "/ca.pem"}, ["tls_ca: set, but the endpoints are http://"]),
        ({"endpoints": ["https://a:1"], "tls_key": "/k.pem"}, ["tls_key: set without tls_cert"]),
        ({"endpoints": ["http://a:1"], "prefix": "/live/"}, ["prefix: must be /name[/name...]"]),
        ({"endpoints": ["http://a:1"], "timeout_s": 0}, ["timeout_s: Input should be greater than 0"]),
        ({"endpoints": []}, ["endpoints: List should have at least 1 item"]),
    ]  # fmt: skip
    for raw, expected in cases:
        with pytest.raises(ValidationError) as info:
            EtcdConfig.model_validate(raw)
        text = format_errors("mesh.yaml", info.value)
        for line in expected:
            assert f"  {line}" in text, text


def test_unreachable_cluster_fails_within_the_timeout() -> None:
    first = free_port()
    second = next(p for p in iter(free_port, None) if p != first)  # the kernel may hand one port twice
    endpoints = [f"http://127.0.0.1:{first}", f"http://127.0.0.1:{second}"]
    log = open_log(endpoints, "/hivemesh-test/none", timeout_s=1.0)
    start = time.monotonic()
    with pytest.raises(LogUnavailable) as info:
        log.append("r1", b"x")
    assert time.monotonic() - start < 3
    assert f"etcd {endpoints[0]},{endpoints[1]}: append of request r1 got no answer within 1 s" in str(
        info.value
    )
    assert "connection refused" in str(info.value)


def test_append_read_round_trip(cluster: EtcdCluster, prefix: str) -> None:
    with open_log(cluster.endpoints, prefix) as log:
        assert log.read() == []
        p1 = log.append("r1", b"\x00raw\xff")
        p2 = log.append("r2", {"method": "create_database", "args": {"name": "sales", "n": 1}})
        p3 = log.append("r3", b"")
        assert p1 < p2 < p3
        entries = log.read(0)
        assert [(e.position, e.request_id) for e in entries] == [(p1, "r1"), (p2, "r2"), (p3, "r3")]
        assert entries[0].command == b"\x00raw\xff" and entries[2].command == b""
        assert entries[1].json() == {"method": "create_database", "args": {"name": "sales", "n": 1}}
        assert log.read(p1) == entries[1:]
        assert log.read(p3) == []
        assert log.read(0, limit=2) == entries[:2]
        for bad in ("", "a/b", "a b", "x" * 257):
            with pytest.raises(InvalidCommand, match="request id must be"):
                log.append(bad, b"x")
        with pytest.raises(InvalidCommand, match="JSON"):
            log.append("r4", {"when": object()})
        assert log.read(p3) == []


def test_append_is_idempotent_by_request_id(cluster: EtcdCluster, prefix: str) -> None:
    with open_log(cluster.endpoints, prefix) as log, open_log(cluster.endpoints[::-1], prefix) as other:
        p = log.append("req-1", {"b": 2, "a": 1})
        log.append("req-2", b"two")
        # a retry, from this proposer or another member's path, with the dict's keys in any order
        assert log.append("req-1", {"a": 1, "b": 2}) == p
        assert other.append("req-1", {"a": 1, "b": 2}) == p
        with pytest.raises(RequestIdConflict, match=f"request req-1 is already in the log at position {p}"):
            log.append("req-1", {"a": 1, "b": 3})
        assert ids(log.read()) == ["req-1", "req-2"]


def test_commands_over_the_request_limit_travel_in_parts(cluster: EtcdCluster, prefix: str) -> None:
    big = bytes(range(256)) * (14 * 1024)  # 3.5 MiB: three parts under etcd's 1.5 MiB request limit
    with open_log(cluster.endpoints, prefix) as log:
        follower = log.follow(0, idle_s=1.0)
        p = log.append("big", big)
        assert log.append("big", big) == p  # a retry: same parts, same entry
        with pytest.raises(RequestIdConflict):
            log.append("big", big[:-1] + b"!")
        assert log.read() == [Entry(p, "big", big)]
        assert next(follower) == Entry(p, "big", big)  # a watch delivers it whole too
        follower.close()
        parts = log._gw.call(  # noqa: SLF001 - the parts' keys, as etcd holds them
            "kv/range",
            {"key": b64(f"{prefix}/part/"), "range_end": b64(prefix_end(f"{prefix}/part/"))},
            "test",
        )
        assert int(parts.get("count", 0)) == 6  # three of the command, three of the refused one
        small = log.append("small", b"s")
        log.compact(small)  # the big command goes, and its parts with it
        parts = log._gw.call(  # noqa: SLF001
            "kv/range",
            {"key": b64(f"{prefix}/part/"), "range_end": b64(prefix_end(f"{prefix}/part/"))},
            "test",
        )
        assert int(parts.get("count", 0)) == 0
        capped = open_log(cluster.endpoints, prefix, max_command_bytes=1024 * 1024)
        with capped, pytest.raises(CommandTooLarge, match="over max_command_bytes 1048576"):
            capped.append("huge", big)
        # a log configured above the cluster's limit: etcd itself refuses, with the same error
        lax = open_log(cluster.endpoints, prefix, max_request_bytes=4 * 1024 * 1024)
        with lax, pytest.raises(CommandTooLarge, match="--max-request-bytes"):
            lax.append("lax", b"x" * (2 * 1024 * 1024))
        near = bytes(range(256)) * 5400  # 1.38 MB: within the limit, one request
        q = log.append("near", near)
        assert log.read(small) == [Entry(q, "near", near)]


def test_concurrent_proposers_one_order(cluster: EtcdCluster, prefix: str) -> None:
    proposers, each = 4, 20
    total = proposers * each
    appended: dict[str, int] = {}
    errors: list[BaseException] = []
    followed: list[Entry] = []
    eps = cluster.endpoints
    follower_log = open_log(eps, prefix)
    follower = follower_log.follow(0)

    def follow() -> None:
        for e in follower:
            followed.append(e)
            if len(followed) == total:
                return

    def propose(n: int) -> None:
        try:
            with open_log(eps[n % 3 :] + eps[: n % 3], prefix) as log:  # each starts at another member
                for i in range(each):
                    rid = f"p{n}-{i}"
                    appended[rid] = log.append(rid, {"proposer": n, "i": i})
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    threads = [threading.Thread(target=propose, args=(n,)) for n in range(proposers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    reader.join(30)
    follower.close()
    follower_log.close()
    assert len(appended) == total and len(set(appended.values())) == total
    expected = sorted(appended, key=appended.__getitem__)
    for ep in eps:  # every member, alone, gives the same sequence, each entry at its append's position
        with open_log([ep], prefix) as one:
            entries = one.read(0, limit=10_000)
        assert [(e.request_id, e.position) for e in entries] == [(r, appended[r]) for r in expected]
    assert [(e.request_id, e.position) for e in followed] == [(r, appended[r]) for r in expected]
    for n in range(proposers):  # each proposer's own appends keep their order
        mine = [e.json()["i"] for e in followed if e.json()["proposer"] == n]
        assert mine == list(range(each))


def test_follow_resumes_without_gap_or_repeat(cluster: EtcdCluster, prefix: str) -> None:
    with open_log(cluster.endpoints, prefix) as log:
        positions = [log.append(f"r{i}", {"i": i}) for i in range(5)]
        first = log.follow(0, batch=2)
        got = [next(first) for _ in range(3)]
        first.close()
        assert list(first) == []
        assert [e.position for e in got] == positions[:3] and first.position == positions[2]
        # a new follower from the position kept, as an applier restarting would make it
        second = log.follow(first.position, idle_s=1.0)
        assert [within(10, lambda: next(second)).request_id for _ in range(2)] == ["r3", "r4"]
        # then entries appended while it waits on its watch
        later = threading.Timer(0.5, lambda: log.append("r5", {"i": 5}))
        later.start()
        e5 = within(10, lambda: next(second))
        later.join()
        assert e5.request_id == "r5" and e5.position > positions[4]
        # close() from another thread ends a next() that is waiting
        threading.Timer(0.5, second.close).start()
        assert within(10, lambda: list(second)) == []
        assert ids(log.read(positions[2])) == ["r3", "r4", "r5"]


def test_hung_leader(cluster: EtcdCluster, prefix: str) -> None:
    leader = cluster.leader()
    eps = [leader.client_url] + [ep for ep in cluster.endpoints if ep != leader.client_url]
    with open_log(eps, prefix) as log:  # the leader first: the follower's watch opens on it
        log.append("before", b"1")
        follower: LogFollower = log.follow(0, idle_s=1.0)
        assert within(10, lambda: next(follower)).request_id == "before"
        waiting = Background(lambda: next(follower))  # blocks in the watch on the leader
        deadline = time.monotonic() + 10
        while follower.watching != leader.client_url:
            assert time.monotonic() < deadline, f"the follower watches on {follower.watching}"
            time.sleep(0.02)
        cluster.pause(leader)
        during = retry_until(RECOVERY_S, lambda: log.append("during", b"2"))
        new_leader = cluster.leader()
        assert new_leader is not leader
        # the follower's watch went quiet with the hung member: it reads again on another one
        e = waiting.result(RECOVERY_S)
        assert (e.request_id, e.position) == ("during", during)
        follower.close()
        cluster.resume(leader)
    with open_log([leader.client_url], prefix) as old:  # the old leader catches up
        assert ids(retry_until(RECOVERY_S, lambda: old.read())) == ["before", "during"]


def test_killed_leader_restarted_on_its_data(cluster: EtcdCluster, prefix: str) -> None:
    with open_log(cluster.endpoints, prefix) as log:
        log.append("before", b"1")
        leader = cluster.leader()
        cluster.kill(leader)
        retry_until(RECOVERY_S, lambda: log.append("while-down", b"2"))
        assert cluster.leader() is not leader
        cluster.restart(leader)
        with open_log([leader.client_url], prefix) as back:
            assert ids(retry_until(RECOVERY_S, lambda: back.read())) == ["before", "while-down"]
            back.append("after", b"3")
        assert ids(log.read()) == ["before", "while-down", "after"]


def test_no_quorum(cluster: EtcdCluster, prefix: str) -> None:
    with open_log(cluster.endpoints, prefix, timeout_s=2.0) as log:
        committed = log.append("committed", b"c")
        survivor, *stopped = cluster.members
        for m in stopped:
            cluster.pause(m)
        start = time.monotonic()
        with pytest.raises(LogUnavailable) as info:
            log.append("unacknowledged", b"u")
        assert time.monotonic() - start < 2.0 + 3.0
        assert (
            f"etcd {','.join(cluster.endpoints)}: append of request unacknowledged got no answer within 2 s"
            in str(info.value)
        )
        with pytest.raises(LogUnavailable, match="read after position 0 got no answer within 2 s"):
            log.read()
        # a serializable read answers from the survivor's committed state
        with open_log([survivor.client_url], prefix, timeout_s=2.0) as alone:
            assert [(e.request_id, e.position) for e in alone.read(serializable=True)] == [
                ("committed", committed)
            ]
        for m in stopped:
            cluster.resume(m)
        # the unacknowledged append may or may not have been committed: the proposer retries it
        # with the same request id, and the log holds it once either way
        retry_until(RECOVERY_S, lambda: log.append("unacknowledged", b"u"))
        assert ids(log.read()) == ["committed", "unacknowledged"]


def test_compaction(cluster: EtcdCluster, prefix: str) -> None:
    with open_log(cluster.endpoints, prefix) as log:
        positions = [log.append(f"r{i}", {"i": i}) for i in range(5)]
        assert log.compacted_below() == 0
        log.compact(positions[3])
        assert log.compacted_below() == positions[3]
        with pytest.raises(LogCompacted) as info:
            log.read(positions[1])
        assert (info.value.position, info.value.compacted_below) == (positions[1], positions[3])
        assert "compacted below position" in str(info.value) and cluster.endpoints[0] in str(info.value)
        with pytest.raises(LogCompacted):
            next(log.follow(0))
        assert [e.position for e in log.read(positions[3] - 1)] == positions[3:]
        follower = log.follow(positions[2])
        assert [within(10, lambda: next(follower)).request_id for _ in range(2)] == ["r3", "r4"]
        follower.close()
        log.compact(positions[1])  # a lower point changes nothing
        with pytest.raises(ValueError, match="the log's head is position"):
            log.compact(positions[4] + 1000)  # beyond the head: nothing changes
        assert log.compacted_below() == positions[3]
        # etcd's own history compaction (as --auto-compaction does) loses no command
        p5 = log.append("r5", {"i": 5})
        r = requests.post(f"{cluster.endpoints[0]}/v3/kv/compaction", json={"revision": str(p5)}, timeout=5)
        assert r.status_code == 200, r.text
        follower = log.follow(positions[3] - 1)
        assert [within(10, lambda: next(follower)).request_id for _ in range(3)] == ["r3", "r4", "r5"]
        follower.close()


def test_tls_with_client_certificates(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    member = EtcdCluster(tmp_path / "etcd", size=1, binary=require_etcd(), tls=pki).start()
    try:
        ep = member.endpoints
        assert ep[0].startswith("https://")
        files = {"tls_ca": str(pki.ca), "tls_cert": str(pki.client_cert), "tls_key": str(pki.client_key)}
        with open_log(ep, "/tls", **files) as log:
            p = log.append("r1", {"over": "tls"})
            assert log.read() == [Entry(p, "r1", b'{"over":"tls"}')]
            follower = log.follow(0)
            assert within(10, lambda: next(follower)).position == p
            follower.close()
        wrong_ca = open_log(ep, "/tls", tls_ca=str(pki.other_ca), tls_cert=str(pki.client_cert))
        with wrong_ca, pytest.raises(LogRefused, match="TLS with https://127.0.0.1"):
            wrong_ca.append("r2", b"x")
        no_cert = open_log(ep, "/tls", timeout_s=2.0, tls_ca=str(pki.ca))
        # etcd ends the handshake (an SSL EOF, LogRefused; a reset would be retried: LogUnavailable)
        with no_cert, pytest.raises((LogRefused, LogUnavailable), match=f"etcd {ep[0]}: "):
            no_cert.append("r2", b"x")
        with pytest.raises(ConfigError, match="etcd tls_key: .*missing.key is not a readable file"):
            open_log(
                ep,
                "/tls",
                tls_ca=str(pki.ca),
                tls_cert=str(pki.client_cert),
                tls_key=str(tmp_path / "missing.key"),
            )
        with open_log(ep, "/tls", **files) as log:
            assert ids(log.read()) == ["r1"]
    finally:
        member.stop()
