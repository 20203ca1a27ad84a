"""The HTTP side of a service: ``/metrics`` (Prometheus text) and ``/health`` (JSON).

``/health`` answers HTTP 200 with the details when the service is healthy, 503 otherwise; any
other path answers 404 naming the two. Served by a daemon thread of a ``ThreadingHTTPServer``;
HTTPS when given a server-side ``ssl.SSLContext`` (the handshake runs on the request's thread).
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from hivemesh.tls import HANDSHAKE_TIMEOUT_S

__all__ = ["MetricsHttpServer"]

Health = Callable[[], tuple[bool, dict[str, Any]]]


class MetricsHttpServer:
    """``/metrics`` of ``registry`` and ``/health`` from ``health()`` -> ``(ok, JSON-able details)``;
    ``tls`` (a server-side ``ssl.SSLContext``) serves them over HTTPS."""

    def __init__(
        self,
        registry: CollectorRegistry,
        health: Health,
        name: str = "http",
        tls: ssl.SSLContext | None = None,
    ):
        self.registry = registry
        self.health = health
        self.name = name
        self.tls = tls
        self.httpd: ThreadingHTTPServer | None = None

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Start serving in a daemon thread; returns the port (0 picks a free one). Raises OSError."""
        outer = self

        class Handler(BaseHTTPRequestHandler):
            """Answers GET /metrics, /health and 404 for anything else."""

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                """One GET: Prometheus text, health JSON (200/503) or a 404 naming both paths."""
                if self.path.startswith("/metrics"):
                    body, ctype, code = generate_latest(outer.registry), CONTENT_TYPE_LATEST, 200
                elif self.path.startswith("/health"):
                    try:
                        ok, details = outer.health()
                    except Exception as e:  # a health check that fails is an unhealthy service
                        ok, details = False, {"status": "error", "error": f"{type(e).__name__}: {e}"}
                    body = json.dumps(details, indent=2, sort_keys=True).encode()
                    ctype, code = "application/json", 200 if ok else 503
                else:
                    body, ctype, code = b"not found: try /metrics or /health\n", "text/plain", 404
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server API
                """Silent: scrapes every few seconds would flood the service's log."""

        if self.tls is not None:
            self.httpd = _TlsHTTPServer((host, port), Handler, self.tls)
        else:
            self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, name=self.name, daemon=True).start()
        return self.httpd.server_address[1]

    def stop(self) -> None:
        """Stop serving HTTP."""
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()


class _TlsHTTPServer(ThreadingHTTPServer):
    """HTTPS: each accepted connection is wrapped in TLS on its own thread (a slow or plaintext
    client never holds up the accept loop)."""

    def __init__(self, address: tuple[str, int], handler: Any, tls: ssl.SSLContext):
        self.tls = tls
        super().__init__(address, handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Handshake (bounded by HANDSHAKE_TIMEOUT_S), then serve the request; a failed handshake
        just ends the connection."""
        sock: socket.socket = request
        try:
            sock.settimeout(HANDSHAKE_TIMEOUT_S)
            wrapped = self.tls.wrap_socket(sock, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            super().finish_request(wrapped, client_address)
        finally:
            try:
                wrapped.close()
            except OSError:
                pass
