"""A light get_table load client for bench/metastore.py's concurrency measurement.

Run as ``python bench/load_client.py``, one process per concurrent client: it imports only Thrift
and the ``hive_metastore`` bindings (about 0.1 s and 25 MB), then obeys one JSON command per line
on stdin and answers each with one JSON line on stdout:

- ``{"op": "connect", "host": ..., "port": ..., "db": ..., "table": ..., "method": ..., "warmup": N}``:
  open a connection (unframed binary, TBinaryProtocolAccelerated, as
  ``tests.support.servers.ThriftClient``) and make the call ``N`` times: ``method`` is ``get_table``
  or ``get_table_req`` (a GetTableRequest with the names only: Hive 4 has no ``get_table``);
  answers ``{"ready": true}``;
- ``{"op": "run", "start": t0, "end": t1}``: sleep until ``time.monotonic()`` is ``t0`` (CLOCK_MONOTONIC,
  the same clock in every process), make the call in a loop and count the calls that complete by
  ``t1``; answers ``{"calls": n, "lat_us": [...], "cpu_s": ...}`` and closes the connection;
- ``{"op": "quit"}`` or end of input: exit.

An error answers ``{"error": "..."}``. bench/metastore.py's threaded mode calls :func:`connect`,
:func:`warm_up` and :func:`run_window` from its own threads.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import GetTableRequest
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport


def connect(host: str, port: int, timeout_ms: int = 120_000) -> tuple[Any, Any]:
    """(client, transport) on an open, unframed binary connection."""
    sock = TSocket.TSocket(host, port)
    sock.setTimeout(timeout_ms)
    transport = TTransport.TBufferedTransport(sock)
    client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocolAccelerated(transport))
    transport.open()
    return client, transport


def table_call(client: Any, db: str, table: str, method: str) -> Callable[[], Any]:
    """The call to repeat: ``get_table(db, table)`` or ``get_table_req`` with the same names."""
    if method == "get_table":
        return lambda: client.get_table(db, table)
    if method == "get_table_req":
        req = GetTableRequest(dbName=db, tblName=table)
        return lambda: client.get_table_req(req)
    raise ValueError(f"unknown table call {method!r}")


def warm_up(call: Callable[[], Any], calls: int) -> None:
    """``calls`` untimed calls (the first one also checks the table is there)."""
    for _ in range(calls):
        call()


def run_window(call: Callable[[], Any], start: float, end: float) -> dict[str, Any]:
    """``call`` in a loop from monotonic ``start`` to ``end``; the calls completed by ``end``, their
    latencies (µs) and the CPU this thread or process used meanwhile."""
    delay = start - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    lat: list[int] = []
    cpu0 = time.thread_time()
    now = time.monotonic()
    while True:
        call()
        t1 = time.monotonic()
        if t1 > end:
            break
        lat.append(round((t1 - now) * 1e6))
        now = t1
    return {"calls": len(lat), "lat_us": lat, "cpu_s": time.thread_time() - cpu0}


def main() -> int:
    """The command loop (see the module docstring)."""
    call = transport = None
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            if cmd["op"] == "quit":
                break
            if cmd["op"] == "connect":
                if transport is not None:
                    transport.close()
                client, transport = connect(cmd["host"], cmd["port"])
                call = table_call(client, cmd["db"], cmd["table"], cmd["method"])
                warm_up(call, cmd["warmup"])
                answer: dict[str, Any] = {"ready": True}
            elif cmd["op"] == "run":
                assert call is not None and transport is not None, "run before connect"
                answer = run_window(call, cmd["start"], cmd["end"])
                transport.close()
                call = transport = None
            else:
                answer = {"error": f"unknown op {cmd['op']!r}"}
        except Exception as e:  # reported to the benchmark, which fails the measurement
            answer = {"error": f"{type(e).__name__}: {e}"}
            if transport is not None:
                transport.close()
            call = transport = None
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    if transport is not None:
        transport.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
