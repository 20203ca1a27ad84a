"""Calls to an etcd cluster (3.4 or newer) through its v3 JSON gateway, with a deadline and
failover between members.

The gateway serves etcd's gRPC API as HTTP POSTs of JSON under ``/v3/`` (etcd 3.4 also answers
``/v3beta/``, 3.5 only ``/v3/``): keys and values travel base64-encoded, 64-bit integers as decimal
strings, false and zero fields are left out, and an error is ``{"error", "message", "code"}`` with
the gRPC status code. A watch is one POST whose response streams one JSON message per line.

Every request sent by this module is idempotent (reads, the log's conditional append, deletes of
entries and etcd compaction), so a failed attempt is retried on the next member until the
operation's deadline; an error that retrying cannot mend is raised at once.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import requests
from requests.adapters import HTTPAdapter

from hivemesh.config import ConfigError
from hivemesh.live.config import EtcdConfig
from hivemesh.live.errors import CommandTooLarge, LiveError, LogRefused, LogUnavailable

__all__ = [
    "API",
    "EtcdGateway",
    "EtcdServerError",
    "WatchBroken",
    "WatchStream",
    "b64",
    "prefix_end",
    "unb64",
]

API = "/v3/"
"""The gateway's path on etcd 3.4 and newer."""

_RETRY_CODES = frozenset({1, 2, 4, 8, 10, 13, 14})
"""gRPC codes worth another attempt: cancelled, unknown (``etcdserver: leader changed``), deadline
exceeded and unavailable (``request timed out``, ``no leader``), too many requests, aborted,
internal."""

_CONNECT_S = 1.0
"""Connect timeout of one attempt, seconds: loopback and LAN members accept at once or never."""


def b64(data: bytes | str) -> str:
    """``data`` (a str as UTF-8) base64-encoded, as the gateway takes keys and values."""
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode("ascii")


def unb64(text: str) -> bytes:
    """The bytes of a base64 key or value from the gateway."""
    return base64.b64decode(text)


def prefix_end(prefix: str) -> str:
    """The ``range_end`` that makes a range cover every key starting with ``prefix`` (its last
    character plus one; ``prefix`` is ASCII)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class EtcdServerError(LiveError):
    """etcd answered one attempt with an error: ``code`` (gRPC) and ``message`` are etcd's."""

    def __init__(self, endpoint: str, code: int, message: str) -> None:
        self.endpoint = endpoint
        self.code = code
        self.message = message
        super().__init__(f"{endpoint}: {message} (gRPC code {code})")

    @property
    def retryable(self) -> bool:
        """True when another attempt, perhaps on another member, may succeed."""
        return self.code in _RETRY_CODES


class WatchBroken(LiveError):
    """A watch stream stopped: its member went quiet for longer than the read timeout, closed the
    connection or sent something that is not a watch message. Reopen it."""


class EtcdGateway:
    """The members of one etcd cluster, reached over HTTP(S) with ``config``'s TLS files.

    :meth:`call` sends one request, trying the members in turn (starting with the last one that
    answered) until one answers or ``config.timeout_s`` has passed; :meth:`watch` opens a watch
    stream on one member. Thread-safe: threads share the connection pool.
    """

    def __init__(self, config: EtcdConfig) -> None:
        """Raises ConfigError when a TLS file of ``config`` is not a readable file."""
        for key in ("tls_ca", "tls_cert", "tls_key"):
            path = getattr(config, key)
            if path and not (os.path.isfile(path) and os.access(path, os.R_OK)):
                raise ConfigError(f"etcd {key}: {path} is not a readable file")
        self.config = config
        self.endpoints = list(config.endpoints)
        self.describe = config.describe()
        self._preferred = 0
        self._lock = threading.Lock()
        self._session = self.new_session()

    def new_session(self) -> requests.Session:
        """A requests session with the cluster's TLS settings (watch streams take their own, so that
        a stream never holds a connection of the shared pool)."""
        s = requests.Session()
        s.trust_env = False  # no proxy from the environment between a zone and its etcd
        s.mount("http://", HTTPAdapter(pool_maxsize=32, max_retries=0))
        s.mount("https://", HTTPAdapter(pool_maxsize=32, max_retries=0))
        if self.config.tls_ca:
            s.verify = self.config.tls_ca
        if self.config.tls_cert:
            s.cert = (
                (self.config.tls_cert, self.config.tls_key) if self.config.tls_key else self.config.tls_cert
            )
        return s

    def close(self) -> None:
        """Close the pooled connections."""
        self._session.close()

    def _order(self) -> list[int]:
        with self._lock:
            first = self._preferred
        n = len(self.endpoints)
        return [(first + i) % n for i in range(n)]

    def _answered(self, index: int) -> None:
        with self._lock:
            self._preferred = index

    def call(self, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        """POST ``body`` to ``/v3/<path>`` and return etcd's JSON answer.

        ``what`` names the operation in errors (``append of request r1``). Raises :class:`LogUnavailable` when no member answered
        within ``timeout_s`` seconds, :class:`CommandTooLarge` for ``request is too large``,
        :class:`EtcdServerError` for other errors retrying cannot mend (compaction, bad request),
        :class:`LogRefused` for refused credentials or certificates.
        """
        timeout_s = self.config.timeout_s
        deadline = time.monotonic() + timeout_s
        # One hung member (stopped, partitioned) must leave time for the others.
        attempt_s = max(timeout_s / 2, 0.2)
        last = "no attempt made"
        order = self._order()
        turn = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            index = order[turn % len(order)]
            turn += 1
            endpoint = self.endpoints[index]
            read_s = min(remaining, attempt_s)
            try:
                resp = self._session.post(
                    endpoint + API + path, json=body, timeout=(min(_CONNECT_S, read_s), read_s)
                )
            except requests.exceptions.SSLError as e:
                raise LogRefused(f"{self.describe}: TLS with {endpoint} failed during {what}: {e}") from e
            except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as e:
                last = f"{endpoint}: {_transport_error(e, read_s)}"
                self._pause(turn, len(order), deadline)
                continue
            try:
                answer = self._answer(endpoint, resp)
            except EtcdServerError as e:
                if "request is too large" in e.message or "larger than max" in e.message:
                    raise CommandTooLarge(
                        f"{self.describe}: {what} refused by {endpoint}: etcd's request limit "
                        f"(--max-request-bytes) is smaller than the request"
                    ) from e
                if e.code in (7, 16):
                    raise LogRefused(f"{self.describe}: {what} refused: {e}") from e
                if not e.retryable:
                    raise
                last = str(e)
                self._pause(turn, len(order), deadline)
                continue
            self._answered(index)
            return answer
        raise LogUnavailable(
            f"{self.describe}: {what} got no answer within {timeout_s:g} s (timeout_s; no member "
            f"answered: down, hung or without quorum); last error: {last}"
        )

    @staticmethod
    def _pause(turn: int, members: int, deadline: float) -> None:
        """After every member failed once in a row, wait a little (an election takes ~1 s)."""
        if turn % members == 0:
            time.sleep(max(0.0, min(0.1, deadline - time.monotonic())))

    @staticmethod
    def _answer(endpoint: str, resp: requests.Response) -> dict[str, Any]:
        try:
            data = resp.json()
        except ValueError:
            data = None
        if resp.status_code == 200 and isinstance(data, dict):
            return cast(dict[str, Any], data)
        if isinstance(data, dict) and "code" in data:
            raise EtcdServerError(endpoint, int(data["code"]), str(data.get("message") or data.get("error")))
        code = 14 if resp.status_code >= 500 else 3  # not the gateway talking (a proxy, a wrong port)
        raise EtcdServerError(endpoint, code, f"HTTP {resp.status_code}: {resp.text[:200]}")

    def watch(self, body: dict[str, Any], read_timeout_s: float) -> WatchStream:
        """Open a watch (``body`` is a ``create_request``) on the member that answered last, else
        the next. Raises :class:`LogUnavailable` when no member accepts it within ``timeout_s``."""
        deadline = time.monotonic() + self.config.timeout_s
        last = "no attempt made"
        turn = 0
        order = self._order()
        while time.monotonic() < deadline:
            index = order[turn % len(order)]
            turn += 1
            endpoint = self.endpoints[index]
            session = self.new_session()
            read_s = read_timeout_s  # also the stream's idle limit: a hung member costs this long
            try:
                resp = session.post(
                    endpoint + API + "watch",
                    json=body,
                    stream=True,
                    timeout=(min(_CONNECT_S, read_s), read_s),
                )
                if resp.status_code != 200:
                    self._answer(endpoint, resp)
                stream = WatchStream(endpoint, session, resp, read_timeout_s)
                first = next(stream.messages(), None)  # etcd confirms the watch: {"created": true}
                if first is not None and first.get("created"):
                    return stream
                stream.close()
                last = f"{endpoint}: watch not created: {first}"
            except requests.exceptions.SSLError as e:
                session.close()
                raise LogRefused(f"{self.describe}: TLS with {endpoint} failed opening a watch: {e}") from e
            except (requests.exceptions.RequestException, EtcdServerError, WatchBroken) as e:
                session.close()
                last = f"{endpoint}: {e}"
            self._pause(turn, len(order), deadline)
        raise LogUnavailable(
            f"{self.describe}: opening a watch got no answer within {self.config.timeout_s:g} s "
            f"(timeout_s); last error: {last}"
        )


class WatchStream:
    """One open watch: :meth:`messages` yields etcd's watch responses (``result`` objects) as they
    arrive; raises :class:`WatchBroken` when the member is quiet for ``read_timeout_s`` seconds or
    the connection ends. :meth:`close` may be called from another thread to stop a reader."""

    def __init__(
        self, endpoint: str, session: requests.Session, resp: requests.Response, read_timeout_s: float
    ):
        self.endpoint = endpoint
        self.read_timeout_s = read_timeout_s
        self._session = session
        self._resp = resp
        self._lines: Iterator[bytes] = resp.iter_lines()
        self.closed = False

    def messages(self) -> Iterator[dict[str, Any]]:
        """The watch's messages (the gateway's ``result`` objects), in order. Raises WatchBroken
        naming the endpoint when the stream ends, is silent for ``read_timeout_s`` seconds, is lost,
        carries an error or a line that is not JSON."""
        while True:
            try:
                line = next(self._lines)
            except StopIteration:
                raise WatchBroken(f"{self.endpoint}: the watch stream ended") from None
            except (requests.exceptions.RequestException, OSError, AttributeError, ValueError) as e:
                # AttributeError/ValueError: urllib3 reading a response that close() released
                raise WatchBroken(
                    f"{self.endpoint}: no watch message within {self.read_timeout_s:g} s or connection lost ({e})"
                ) from e
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError as e:
                raise WatchBroken(f"{self.endpoint}: not a watch message: {line[:200]!r}") from e
            if "error" in data and "result" not in data:
                err = data["error"]
                raise WatchBroken(
                    f"{self.endpoint}: watch error: {err.get('message', err) if isinstance(err, dict) else err}"
                )
            yield cast(dict[str, Any], data.get("result", {}))

    def close(self) -> None:
        """Close the stream and its connection (idempotent). The socket is shut down first: that
        wakes a reader blocked in another thread at once (closing the response alone waits for
        that read to time out)."""
        self.closed = True
        conn = getattr(self._resp.raw, "connection", None)
        sock = getattr(conn, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed
        try:
            self._resp.close()
        finally:
            self._session.close()


def _transport_error(e: Exception, read_s: float) -> str:
    if isinstance(e, requests.exceptions.ConnectTimeout):
        return "connect timed out"
    if isinstance(e, requests.exceptions.Timeout):
        return f"no answer within {read_s:.1f} s"
    text = str(e)
    if "Connection refused" in text:
        return "connection refused"
    return f"connection failed ({text[:200]})"
