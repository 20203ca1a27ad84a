"""A local AWS Glue endpoint for tests: a real moto server over HTTP, and an optional paging proxy.

:class:`MotoGlue` runs ``moto.server.ThreadedMotoServer`` on a free port of 127.0.0.1. Any
credentials are accepted (moto does not check signatures); :data:`CREDENTIALS` are dummy ones.

moto answers ``GetDatabases``, ``GetTables`` and ``GetPartitions`` in one response whatever
``MaxResults`` says (it never returns ``NextToken``), and ``BatchGetPartition`` never leaves
``UnprocessedKeys``. :class:`GluePagingProxy` is a small HTTP proxy in front of moto that adds what
real Glue does: it cuts those list responses into pages of ``MaxResults`` items chained by
``NextToken``, can leave part of a ``BatchGetPartition`` unprocessed for a number of rounds, and
records every request (``X-Amz-Target`` operation and JSON body) so tests can count pages and check
``CatalogId``. Everything else is forwarded unchanged.
"""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.servers import free_port

REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
CREDENTIAL_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
}

# Paged list calls of Glue and the response key holding their items.
PAGED = {"GetDatabases": "DatabaseList", "GetTables": "TableList", "GetPartitions": "Partitions"}


class MotoGlue:
    """A moto server in a thread on 127.0.0.1:<free port>; ``endpoint_url`` once started.

    Use as a context manager, or ``start()``/``stop()``.
    """

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)

    def start(self) -> MotoGlue:
        import logging

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
        self._server.start()
        # moto keeps its backends per process, not per server: start every server empty, so a
        # test module does not see what an earlier one created
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST"))
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> MotoGlue:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, endpoint_url: str | None = None) -> Any:
        """A plain boto3 glue client for this server (or for ``endpoint_url``), dummy credentials."""
        import boto3

        return boto3.client(
            "glue", region_name=REGION, endpoint_url=endpoint_url or self.endpoint_url, **CREDENTIALS
        )


class GluePagingProxy:
    """HTTP proxy to a moto Glue server that pages list calls as Glue does (see module docstring).

    ``upstream``: ``http://host:port`` of moto. ``unprocessed_rounds``: how many BatchGetPartition
    requests (from now on) answer only the first half of their keys and return the rest as
    ``UnprocessedKeys`` (a single key is left wholly unprocessed). ``requests``: ``(operation, body)`` of every request, in arrival order.
    """

    def __init__(self, upstream: str):
        host, _, port = upstream.removeprefix("http://").partition(":")
        self.upstream = (host, int(port))
        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.unprocessed_rounds = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> GluePagingProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def __enter__(self) -> GluePagingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def calls(self, operation: str) -> list[dict[str, Any]]:
        """Bodies of the recorded requests of one operation (``GetPartitions``)."""
        with self._lock:
            return [body for op, body in self.requests if op == operation]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    # ---------------------------------------------------------------- internals
    def _forward(self, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        data = json.dumps(body).encode()
        conn = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            fwd = {k: v for k, v in headers.items() if k.lower() not in ("host", "content-length")}
            fwd["Content-Length"] = str(len(data))
            conn.request("POST", "/", body=data, headers=fwd)
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def _answer(
        self, op: str, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, dict[str, str], bytes]:
        if op in PAGED and "MaxResults" in body:
            size = int(body["MaxResults"])
            start = int(body.get("NextToken") or "0")
            upstream = {k: v for k, v in body.items() if k not in ("MaxResults", "NextToken")}
            status, rheaders, raw = self._forward(headers, upstream)
            if status != 200:
                return status, rheaders, raw
            doc = json.loads(raw or b"{}")
            items = doc.get(PAGED[op]) or []
            doc[PAGED[op]] = items[start : start + size]
            doc.pop("NextToken", None)
            if start + size < len(items):
                doc["NextToken"] = str(start + size)
            return status, rheaders, json.dumps(doc).encode()
        if op == "BatchGetPartition":
            with self._lock:
                defer = self.unprocessed_rounds > 0
                if defer:
                    self.unprocessed_rounds -= 1
            keys = body.get("PartitionsToGet") or []
            if defer and keys:
                keep, rest = keys[: len(keys) // 2], keys[len(keys) // 2 :]
                status, rheaders, raw = 200, {"Content-Type": "application/x-amz-json-1.1"}, b"{}"
                if keep:
                    status, rheaders, raw = self._forward(headers, {**body, "PartitionsToGet": keep})
                    if status != 200:
                        return status, rheaders, raw
                doc = json.loads(raw or b"{}")
                doc.setdefault("Partitions", [])
                doc["UnprocessedKeys"] = rest
                return status, rheaders, json.dumps(doc).encode()
        return self._forward(headers, body)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items()}
                op = (headers.get("X-Amz-Target") or "").rpartition(".")[2]
                body = json.loads(raw or b"{}")
                with proxy._lock:
                    proxy.requests.append((op, body))
                status, rheaders, data = proxy._answer(op, headers, body)
                self.send_response(status)
                for k, v in rheaders.items():
                    if k.lower() not in (
                        "content-length",
                        "transfer-encoding",
                        "connection",
                        "date",
                        "server",
                    ):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
