"""A bounded, seeded fuzzer of ``hivemesh metastore`` over Thrift (issue 18), run in CI.

A real metastore subprocess (SQLite; PostgreSQL as well when the test fixtures have it) gets a few
thousand mutated unframed binary Thrift messages: valid calls (``get_table``,
``get_partitions_by_filter``, ``open_txns``, ``lock``, ``create_table`` with a struct, ...) encoded
with the ``hive_metastore`` classes, then bit-flipped, truncated, with a string/container length
inflated, a field duplicated, the method name or message type replaced, spliced or followed by
garbage; each on a new connection, sometimes followed by a valid call on the same connection.
Then ``get_partitions_by_filter`` gets random grammar-ish filters, and IN lists and filters at and
just over the documented limits (:data:`MAX_FILTER_TERMS`, :data:`MAX_FILTER_CHARS`).

Invariants, checked for every message: the answer is whole Thrift REPLY or EXCEPTION messages, or
the connection is closed (nothing else: no garbage, no half message before a clean close); no
answer takes longer than :data:`REPLY_BOUND_S`; the process never dies, and a connection opened
before the fuzzing keeps getting correct answers; the server's resident memory grows by less than
:data:`RSS_BOUND_MB`; no path outside the warehouse is created (the fuzzed locations point at a
sibling directory through ``..``, and the server runs with ``--allowed-locations`` set to its
warehouse: without it any location is allowed, and, as Hive does, the metastore creates the
directories of the tables and partitions it is given).

Bounds: ``HIVEMESH_FUZZ_COUNT`` messages (default 5000) and ``HIVEMESH_FUZZ_SECONDS`` seconds (default 20)
per test and backend, whichever comes first.
``HIVEMESH_FUZZ_SEED`` (default 1818) seeds everything; a failure message starts with the seed and
the case number, and ``HIVEMESH_FUZZ_SEED=<seed> HIVEMESH_FUZZ_CASE=<n>`` replays one case alone.
"""

from __future__ import annotations

import errno
import os
import random
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import (
    AbortTxnRequest,
    AddPartitionsRequest,
    CheckLockRequest,
    CommitTxnRequest,
    Database,
    FieldSchema,
    GetTableRequest,
    HeartbeatRequest,
    LockComponent,
    LockLevel,
    LockRequest,
    LockType,
    MetaException,
    NotificationEventRequest,
    OpenTxnRequest,
    Partition,
    SerDeInfo,
    ShowLocksRequest,
    StorageDescriptor,
    Table,
)
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TMessageType, TType
from thrift.transport import TTransport

from hivemesh.metastore.partition_filter import MAX_FILTER_CHARS, MAX_FILTER_TERMS
from tests.conftest import PG_SKIP_REASON, drop_pg_database, make_pg_database, postgres_available
from tests.support.servers import HivemeshProcess, ThriftClient

SEED = int(os.environ.get("HIVEMESH_FUZZ_SEED", "1818"))
COUNT = int(os.environ.get("HIVEMESH_FUZZ_COUNT", "5000"))
BUDGET_S = float(os.environ.get("HIVEMESH_FUZZ_SECONDS", "20"))
ONLY_CASE = os.environ.get("HIVEMESH_FUZZ_CASE")
FILTER_COUNT = 400  # random filters per backend (plus the limit cases)
REPLY_BOUND_S = 10.0  # no answer (or close) may take longer
RSS_BOUND_MB = 300  # resident memory growth allowed over the whole run
DB = "fuzz"
MB = 1024 * 1024


# ---------------------------------------------------------------------------------------------- messages
def _encode(method: str, *args: object, seqid: int = 0) -> bytes:
    """The exact bytes an unframed binary Hive client sends for one call."""
    buf = TTransport.TMemoryBuffer()
    client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(buf))
    client._seqid = seqid
    getattr(client, f"send_{method}")(*args)
    return buf.getvalue()


def _sd(location: str) -> StorageDescriptor:
    return StorageDescriptor(
        cols=[FieldSchema("id", "bigint", "key"), FieldSchema("name", "string", None)],
        location=location,
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde", parameters={}),
        parameters={},
    )


def _table(name: str, location: str, partitioned: bool = True) -> Table:
    return Table(
        tableName=name,
        dbName=DB,
        owner="fuzz",
        tableType="EXTERNAL_TABLE",
        parameters={"EXTERNAL": "TRUE"},
        partitionKeys=[FieldSchema("dt", "string", None), FieldSchema("n", "int", None)]
        if partitioned
        else [],
        sd=_sd(location),
    )


def _seeds(warehouse: Path, outside: Path) -> list[tuple[str, bytes]]:
    """Valid calls to mutate (name, bytes); locations point outside the warehouse through ``..``."""
    esc = f"{warehouse}/../{outside.name}"
    lock = LockRequest(
        component=[LockComponent(LockType.SHARED_READ, LockLevel.TABLE, DB, tablename="t")],
        user="fuzz",
        hostname="fuzzhost",
    )
    part = Partition(values=["2024-01-09", "9"], dbName=DB, tableName="t", sd=_sd(f"{esc}/p"), parameters={})
    calls: list[tuple[str, tuple[object, ...]]] = [
        ("get_all_databases", ()),
        ("get_database", (DB,)),
        ("get_table", (DB, "t")),
        ("get_table_req", (GetTableRequest(dbName=DB, tblName="t"),)),
        ("get_partitions_by_filter", (DB, "t", "dt >= '2024-01-02' and n in (1, 2, 3)", -1)),
        ("get_partition_names", (DB, "t", -1)),
        ("get_partitions_by_names", (DB, "t", ["dt=2024-01-01/n=1", "dt=x/n=2"])),
        ("get_partitions", (DB, "t", 10)),
        ("get_table_meta", ("fuzz*", "*", [])),
        ("open_txns", (OpenTxnRequest(num_txns=2, user="fuzz", hostname="fuzzhost"),)),
        ("commit_txn", (CommitTxnRequest(txnid=1),)),
        ("abort_txn", (AbortTxnRequest(txnid=2),)),
        ("heartbeat", (HeartbeatRequest(lockid=1, txnid=1),)),
        ("lock", (lock,)),
        ("check_lock", (CheckLockRequest(lockid=1),)),
        ("show_locks", (ShowLocksRequest(dbname=DB),)),
        ("get_next_notification", (NotificationEventRequest(lastEvent=0, maxEvents=5),)),
        ("set_ugi", ("fuzz", ["fuzzers"])),
        ("create_table", (_table("made", f"{esc}/made"),)),
        ("create_table", (_table("made_rel", "../outside/rel", partitioned=False),)),
        ("create_database", (Database(name="fuzz_db", locationUri=f"file:{esc}/db", parameters={}),)),
        ("add_partition", (part,)),
        ("add_partitions_req", (AddPartitionsRequest(DB, "t", [part], ifNotExists=True, needResult=True),)),
        ("alter_table", (DB, "u", _table("u", f"{esc}/moved", partitioned=False))),
        ("drop_table", (DB, "no_such_table", True)),
    ]
    return [(name, _encode(name, *args, seqid=7)) for name, args in calls]


@dataclass
class _Layout:
    """Where a binary Thrift message keeps its method name, its length fields (string lengths,
    container sizes) and its struct fields (as byte spans), found by walking it."""

    data: bytes
    name: tuple[int, int] = (0, 0)  # offset of the name's length field, end of the name
    lengths: list[int] = field(default_factory=list)
    fields: list[tuple[int, int]] = field(default_factory=list)

    _FIXED = {TType.BOOL: 1, TType.BYTE: 1, TType.DOUBLE: 8, TType.I16: 2, TType.I32: 4, TType.I64: 8}

    @classmethod
    def of(cls, data: bytes) -> _Layout:
        """The layout of a valid message."""
        layout = cls(data)
        n = struct.unpack_from("!i", data, 4)[0]
        layout.name = (4, 8 + n)
        layout._struct(12 + n)
        return layout

    def _struct(self, pos: int) -> int:
        while True:
            ftype = self.data[pos]
            if ftype == TType.STOP:
                return pos + 1
            start, pos = pos, self._value(ftype, pos + 3)
            self.fields.append((start, pos))

    def _value(self, t: int, pos: int) -> int:
        if t in self._FIXED:
            return pos + self._FIXED[t]
        if t == TType.STRING:
            self.lengths.append(pos)
            return pos + 4 + struct.unpack_from("!i", self.data, pos)[0]
        if t == TType.STRUCT:
            return self._struct(pos)
        if t == TType.MAP:
            kt, vt, n = self.data[pos], self.data[pos + 1], struct.unpack_from("!i", self.data, pos + 2)[0]
            self.lengths.append(pos + 2)
            pos += 6
            for _ in range(n):
                pos = self._value(vt, self._value(kt, pos))
            return pos
        if t in (TType.LIST, TType.SET):
            et, n = self.data[pos], struct.unpack_from("!i", self.data, pos + 1)[0]
            self.lengths.append(pos + 1)
            pos += 5
            for _ in range(n):
                pos = self._value(et, pos)
            return pos
        raise ValueError(f"type {t} at {pos}")


METHODS = sorted(n[5:] for n in dir(ThriftHiveMetastore.Client) if n.startswith("send_"))
_BIG_LENGTHS = (-1, -(2**31), 2**31 - 1, 0x7FFFFF00, 100 * MB + 1, 100 * MB - 1, 16 * MB, 65536, 255)


def _flip(rng: random.Random, data: bytes, layout: _Layout) -> tuple[bytes, str]:
    out = bytearray(data)
    n = rng.choice((1, 1, 2, 3, 8))
    for _ in range(n):
        pos = rng.randrange(min(len(out), 40)) if rng.random() < 0.3 else rng.randrange(len(out))
        out[pos] ^= 1 << rng.randrange(8)
    return bytes(out), f"flip{n}"


def _truncate(rng: random.Random, data: bytes, layout: _Layout) -> tuple[bytes, str]:
    cut = rng.randrange(len(data))
    return data[:cut], f"truncate@{cut}"


def _inflate(rng: random.Random, data: bytes, layout: _Layout) -> tuple[bytes, str]:
    pos = rng.choice([*layout.lengths, layout.name[0]])
    old = struct.unpack_from("!i", data, pos)[0]
    new = rng.choice((*_BIG_LENGTHS, old + 1, old - 1, old * 1000 + 7))
    new = max(-(2**31), min(2**31 - 1, new))
    return data[:pos] + struct.pack("!i", new) + data[pos + 4 :], f"length@{pos}={new}"


def _duplicate(rng: random.Random, data: bytes, layout: _Layout) -> tuple[bytes, str]:
    start, end = rng.choice(layout.fields)
    times = rng.choice((1, 1, 2, 50))
    return data[:end] + data[start:end] * times + data[end:], f"dup{times}@{start}"


def _rename(rng: random.Random, data: bytes, layout: _Layout) -> tuple[bytes, str]:
    kind = rng.randrange(4)
    if kind == 0:
        name = rng.choice(METHODS).encode()  # a real method with another method's arguments
    elif kind == 1:
        name = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
    elif kind == 2:
        name = rng.choice(METHODS).encode() * rng.choice((10, 1000))
    else:
        name = rng.choice((b"", b"shutdown", b"\xff\xfe", b"get_table\x00", b"__init__", b"process"))
    start, end = layout.name
    return data[:start] + struct.pack("!i", len(name)) + name + data[end:], f"name={name[:30]!r}"


def _message_type(rng: random.Random, data: bytes, layout: _Layout) -> tuple[bytes, str]:
    kind = rng.randrange(256)
    return data[:3] + bytes([kind]) + data[4:], f"type={kind}"


def _splice(rng: random.Random, data: bytes, other: bytes) -> tuple[bytes, str]:
    a, b = rng.randrange(len(data)), rng.randrange(len(other))
    return data[:a] + other[b:], f"splice@{a}/{b}"


def _garbage(rng: random.Random, data: bytes, layout: _Layout) -> tuple[bytes, str]:
    junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    return data + junk, f"garbage{len(junk)}"


MUTATORS: list[Callable[[random.Random, bytes, _Layout], tuple[bytes, str]]] = [
    _flip,
    _flip,
    _truncate,
    _inflate,
    _inflate,
    _duplicate,
    _rename,
    _message_type,
    _garbage,
]


def _mutant(rng: random.Random, seeds: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    """One mutated message and what was done to it (one to three mutations, or a splice)."""
    name, data = rng.choice(seeds)
    if rng.random() < 0.08:
        out, what = _splice(rng, data, rng.choice(seeds)[1])
        return out, f"{name}: {what}"
    steps = []
    out = data
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        try:
            layout = _Layout.of(out)
        except (ValueError, IndexError, struct.error):
            layout = _Layout(out, name=_Layout.of(data).name)  # mutated already: flip or cut further
            mutate = rng.choice((_flip, _truncate, _garbage))
        else:
            mutate = rng.choice([m for m in MUTATORS if layout.fields or m is not _duplicate])
        if not out:
            break
        out, what = mutate(rng, out, layout)
        steps.append(what)
    return out, f"{name}: {' + '.join(steps)}"


# ---------------------------------------------------------------------------------------------- checks
@dataclass
class Answer:
    """What one exchange gave: the bytes read, how it ended and how long it took."""

    data: bytes
    reset: bool
    seconds: float


def _exchange(host: str, port: int, payload: bytes) -> Answer:
    """Send ``payload`` on a new connection, end our side, read until the server closes."""
    t0 = time.monotonic()
    chunks: list[bytes] = []
    reset = False
    with socket.create_connection((host, port), timeout=REPLY_BOUND_S) as sock:
        sock.settimeout(REPLY_BOUND_S)
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
        except OSError as e:
            if e.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN):
                raise
            reset = True  # the server already gave up on the message: allowed
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
                if time.monotonic() - t0 > REPLY_BOUND_S:
                    raise TimeoutError("answer still coming")
        except ConnectionResetError:
            reset = True
    return Answer(b"".join(chunks), reset, time.monotonic() - t0)


def _messages(answer: Answer) -> list[tuple[str, int]]:
    """The (name, type) of each whole message in the answer; AssertionError for anything that is
    not REPLY/EXCEPTION messages (a cut last message is allowed only when the connection was reset)."""
    buf = TTransport.TMemoryBuffer(answer.data)
    proto = TBinaryProtocol.TBinaryProtocol(buf, strictRead=True)
    out = []
    while buf._buffer.tell() < len(answer.data):
        start = buf._buffer.tell()
        try:
            name, mtype, _seqid = proto.readMessageBegin()
            proto.skip(TType.STRUCT)
            proto.readMessageEnd()
        except (EOFError, TTransport.TTransportException) as e:
            assert answer.reset, (
                f"a cut message after {len(out)} whole ones ({e}): {answer.data[start:][:80]!r}"
            )
            break
        assert mtype in (TMessageType.REPLY, TMessageType.EXCEPTION), f"message type {mtype}"
        out.append((name, mtype))
    return out


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@dataclass
class Target:
    """A fuzzed metastore: its process, warehouse, the sibling directory that must stay empty and
    the entries its root had before fuzzing."""

    proc: HivemeshProcess
    root: Path
    warehouse: Path
    outside: Path
    backend: str
    before: set[str] = field(default_factory=set)

    @property
    def pid(self) -> int:
        assert self.proc.proc is not None
        return self.proc.proc.pid

    def alive(self) -> None:
        """The process runs and a new connection gets a correct answer."""
        assert self.proc.proc is not None and self.proc.proc.poll() is None, "the metastore died"
        with ThriftClient(self.proc.host, self.proc.port, timeout_ms=int(REPLY_BOUND_S * 1000)) as c:
            assert "default" in c.get_all_databases()

    def nothing_outside(self) -> None:
        """No path was created beside the warehouse (nor in the outside directory)."""
        assert list(self.outside.iterdir()) == [], (
            f"created outside the warehouse: {list(self.outside.iterdir())}"
        )
        new = {p.name for p in self.root.iterdir()} - self.before
        new = {n for n in new if not n.startswith("m.db")}  # SQLite's -wal/-shm/-journal
        assert not new, f"created beside the warehouse: {sorted(new)}"


def _setup(client: ThriftHiveMetastore.Client, warehouse: Path) -> None:
    """Database ``fuzz``: ``t`` partitioned by (dt string, n int) with 12 partitions, ``u`` not
    partitioned (again after a fuzzed call dropped any of it)."""
    if DB not in client.get_all_databases():
        client.create_database(Database(name=DB, locationUri=str(warehouse / f"{DB}.db"), parameters={}))
    tables = client.get_all_tables(DB)
    if "u" not in tables:
        client.create_table(_table("u", str(warehouse / f"{DB}.db" / "u"), partitioned=False))
    if "t" not in tables:
        client.create_table(_table("t", str(warehouse / f"{DB}.db" / "t")))
        parts = [
            Partition(
                values=[f"2024-01-0{d}", str(n)],
                dbName=DB,
                tableName="t",
                sd=_sd(str(warehouse / f"{DB}.db" / "t" / f"dt=2024-01-0{d}" / f"n={n}")),
                parameters={},
            )
            for d in range(1, 5)
            for n in range(1, 4)
        ]
        client.add_partitions(parts)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A metastore on each backend, limited to its warehouse, with the ``fuzz`` tables."""
    root = tmp_path_factory.mktemp(f"fuzz_{request.param}")
    warehouse, outside = root / "warehouse", root / "outside"
    warehouse.mkdir()
    outside.mkdir()
    pg_url = None
    if request.param == "postgres":
        if not postgres_available():
            pytest.skip(PG_SKIP_REASON)
        url = pg_url = make_pg_database("hivemesh_fuzz")
    else:
        url = f"sqlite:///{root / 'm.db'}"
    limit = ["--allowed-locations", str(warehouse)]
    proc = HivemeshProcess(url, warehouse, root / "metastore.log", limit)
    proc.start()
    try:
        with ThriftClient(proc.host, proc.port) as c:
            _setup(c, warehouse)
        tgt = Target(proc, root, warehouse, outside, request.param)
        tgt.before = {p.name for p in root.iterdir()}
        yield tgt
    finally:
        proc.stop()
        if pg_url is not None:
            drop_pg_database(pg_url)


def _run(
    target: Target,
    cases: Iterator[tuple[int, bytes, str]],
    count: int,
    check: Callable[[int, Answer], None] | None = None,
) -> dict[str, int]:
    """Send every case (bounded by ``count`` and :data:`BUDGET_S`), checking the invariants; a
    failure names the seed, the case and its mutation. Returns counts of what happened."""
    host, port = target.proc.host, target.proc.port
    stats = {"cases": 0, "replies": 0, "exceptions": 0, "closed": 0}
    deadline = time.monotonic() + BUDGET_S
    with ThriftClient(host, port, timeout_ms=int(REPLY_BOUND_S * 1000)) as witness:
        assert DB in witness.get_all_databases()
        rss0 = _rss_mb(target.pid)
        for case, payload, what in cases:
            if stats["cases"] >= count or time.monotonic() > deadline:
                break
            where = f"HIVEMESH_FUZZ_SEED={SEED} HIVEMESH_FUZZ_CASE={case} ({target.backend}; {what})"
            try:
                answer = _exchange(host, port, payload)
                assert answer.seconds <= REPLY_BOUND_S, f"answered in {answer.seconds:.1f} s"
                msgs = _messages(answer)
                if check is not None:
                    check(case, answer)
                stats["cases"] += 1
                stats["replies"] += sum(1 for _, t in msgs if t == TMessageType.REPLY)
                stats["exceptions"] += sum(1 for _, t in msgs if t == TMessageType.EXCEPTION)
                stats["closed"] += not msgs
                if stats["cases"] % 100 == 0:
                    target.alive()
                    assert DB in witness.get_all_databases()  # an old connection is unaffected
                    grew = _rss_mb(target.pid) - rss0
                    assert grew < RSS_BOUND_MB, f"RSS grew {grew:.0f} MB"
            except Exception as e:  # the invariant broken, a timeout, an undeclared exception
                raise AssertionError(f"{where}: {type(e).__name__}: {e}") from e
        target.alive()
        assert DB in witness.get_all_databases()
        grew = _rss_mb(target.pid) - rss0
        assert grew < RSS_BOUND_MB, f"seed {SEED}: RSS grew {grew:.0f} MB"
        stats["rss_growth_mb"] = round(grew)
    target.nothing_outside()
    return stats


# ---------------------------------------------------------------------------------------------- tests
def test_mutated_thrift_messages(target: Target) -> None:
    """Mutated calls never kill, hang or bloat the server, and get well-formed answers or a close."""
    seeds = _seeds(target.warehouse, target.outside)
    valid = _encode("get_all_databases", seqid=99)

    def cases() -> Iterator[tuple[int, bytes, str]]:
        for case in range(10**9):
            if ONLY_CASE is not None and str(case) != ONLY_CASE:
                continue
            rng = random.Random(f"{SEED}:{case}")
            payload, what = _mutant(rng, seeds)
            if rng.random() < 0.25:  # then a valid call on the same connection
                payload, what = payload + valid, f"{what} + valid call"
            yield case, payload, what

    stats = _run(target, cases(), COUNT)
    print(f"seed {SEED} on {target.backend}: {stats}")
    if ONLY_CASE is None:  # the mutations reach all three outcomes
        assert stats["replies"] > 0 and stats["exceptions"] > 0 and stats["closed"] > 0


_KEYS = ("dt", "n", "DT", "`n`", "`dt`", "nope", "`a``b`", "1x", "_")
_OPS = ("=", "==", "!=", "<>", "<", "<=", ">", ">=", " like ", " LIKE ", "=<", "!")
_VALUES = (
    "'2024-01-02'",
    '"2024-01-03"',
    "2024-01-04",
    "2024-13-45",
    "1",
    "-7",
    "007",
    "2.5",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "1e309",
    "'a\\'b'",
    "'%'",
    "'.*'",
    "'_'",
    "''",
    "'\u00e9\u2603\U0001f600'",
    "'\x00'",
    "NULL",
)


def _random_filter(rng: random.Random, depth: int = 0) -> str:
    """A grammar-ish filter: mostly well-formed predicates, and/or/not, parentheses, IN lists,
    BETWEEN, with some random damage."""
    r = rng.random()
    if depth < 4 and r < 0.3:
        joiner = rng.choice((" and ", " or ", " AND ", " Or ", " ", " and and "))
        return joiner.join(_random_filter(rng, depth + 1) for _ in range(rng.randint(2, 4)))
    if depth < 4 and r < 0.4:
        return f"{rng.choice(('not ', 'NOT ', '', '!'))}({_random_filter(rng, depth + 1)})"
    key, value = rng.choice(_KEYS), rng.choice(_VALUES)
    kind = rng.randrange(6)
    if kind == 0:
        text = f"{value} {rng.choice(_OPS)} {key}"
    elif kind == 1:
        values = ", ".join(rng.choice(_VALUES) for _ in range(rng.randint(0, 30)))
        text = f"({key}) {rng.choice(('in', 'not in', 'IN'))} ({values})"
    elif kind == 2:
        text = f"{key} {rng.choice(('between', 'not between'))} {value} and {rng.choice(_VALUES)}"
    elif kind == 3:
        structs = ", ".join(f"struct({rng.choice(_VALUES)}, {rng.choice(_VALUES)})" for _ in range(3))
        text = f"(struct(dt, n)) in ({structs})"
    else:
        text = f"{key} {rng.choice(_OPS)} {value}"
    if rng.random() < 0.1:  # damage: drop, repeat or insert a character
        pos = rng.randrange(len(text) + 1)
        text = rng.choice(
            (
                text[:pos] + text[pos + 1 :],
                text[:pos] + text[pos:] * 2,
                text[:pos] + chr(rng.randrange(32, 0x3000)),
            )
        )
    return text


def _limit_filters() -> list[tuple[str, str, bool]]:
    """(what, filter, must be refused): IN lists and text at and just over the documented limits,
    and deep nesting."""
    in_list = ", ".join(f"'2024-01-{i % 28 + 1:02d}'" for i in range(MAX_FILTER_TERMS))
    over = in_list + ", '2024-02-01'"
    pad = MAX_FILTER_CHARS - len("dt = ''")
    return [
        (f"IN list of {MAX_FILTER_TERMS}", f"dt in ({in_list})", False),
        (f"IN list of {MAX_FILTER_TERMS + 1}", f"dt in ({over})", True),
        (
            f"NOT IN list of {MAX_FILTER_TERMS}",
            f"(n) not in ({', '.join(map(str, range(MAX_FILTER_TERMS)))})",
            False,
        ),
        (f"{MAX_FILTER_CHARS} characters", f"dt = '{'x' * pad}'", False),
        (f"{MAX_FILTER_CHARS + 1} characters", f"dt = '{'x' * (pad + 1)}'", True),
        ("100,000 nested parentheses", "(" * 100_000 + "dt = 'a'" + ")" * 100_000, True),
        ("100,000 NOTs", "not " * 100_000 + "dt = 'a'", True),
        ("10,000 ORs", " or ".join(f"n = {i}" for i in range(10_000)), False),
    ]


def test_fuzzed_partition_filters(target: Target) -> None:
    """Random filters, and filters at the documented limits, get a result or a MetaException
    (never another exception, a close or a hang); the limit cases as documented."""
    expect: dict[int, tuple[str, bool | None]] = {}
    limits = _limit_filters()

    def cases() -> Iterator[tuple[int, bytes, str]]:
        for case, (what, text, refused) in enumerate(limits):
            if ONLY_CASE is not None and str(case) != ONLY_CASE:
                continue
            expect[case] = (text, refused)
            yield case, _encode("get_partitions_by_filter", DB, "t", text, -1, seqid=case), what
        for case in range(len(limits), len(limits) + FILTER_COUNT):
            if ONLY_CASE is not None and str(case) != ONLY_CASE:
                continue
            text = _random_filter(random.Random(f"{SEED}:filter:{case}"))
            expect[case] = (text, None)
            yield (
                case,
                _encode("get_partitions_by_filter", DB, "t", text, -1, seqid=case),
                f"filter {text[:200]!r}",
            )

    def check(case: int, answer: Answer) -> None:
        buf = TTransport.TMemoryBuffer(answer.data)
        client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(buf))
        assert answer.data, "the connection was closed instead of answering"
        try:
            parts = client.recv_get_partitions_by_filter()
        except MetaException as e:
            assert expect[case][1] is not False, f"refused: {e.message[:300]}"
            return
        # anything else (NoSuchObjectException for a dropped table aside) is a server error
        assert expect[case][1] is not True, f"accepted: {len(parts)} partitions"
        assert all(p.dbName == DB and p.tableName == "t" for p in parts)

    with ThriftClient(target.proc.host, target.proc.port) as c:
        _setup(c, target.warehouse)  # the message fuzz may have dropped some of it
    stats = _run(target, cases(), len(limits) + FILTER_COUNT, check)
    print(f"seed {SEED} filters on {target.backend}: {stats}")


def test_nul_in_a_location_is_a_meta_exception(target: Target) -> None:
    """Found by the fuzzer: a location with a NUL character failed inside the server
    (``ValueError: embedded null byte``, an internal error with a traceback in its log); it is
    refused with MetaException like any other bad location, and nothing is created."""
    esc = f"{target.warehouse}/x\x00y"
    with ThriftClient(target.proc.host, target.proc.port) as c:
        with pytest.raises(MetaException, match="NUL character"):
            c.create_table(_table("nul_loc", esc, partitioned=False))
        with pytest.raises(MetaException, match="NUL character"):
            c.create_database(Database(name="nul_db", locationUri="rel\x00ative", parameters={}))
        part = Partition(values=["2024-02-01", "1"], dbName=DB, tableName="t", sd=_sd(esc), parameters={})
        _setup(c, target.warehouse)
        with pytest.raises(MetaException, match="NUL character"):
            c.add_partition(part)
        assert "nul_loc" not in c.get_all_tables(DB)
    target.alive()
