"""Structured logs (``--log-format json``) and the proxy's audit sink (``--audit-log FILE``)."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore.ttypes import NoSuchObjectException

from hivemesh.client.metastore import MetastoreClient
from hivemesh.config import ConfigError, load_config
from hivemesh.federation.config import load_federation_config
from hivemesh.logs import AUDIT_LOGGER, JsonFormatter, setup_logging
from tests.support.proxy import ProxyProcess, write_mesh
from tests.support.servers import ThriftClient, die_with_parent

KEYS = {"ts", "level", "logger", "message"}
TS = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"


@pytest.fixture
def clean_logging() -> Iterator[None]:
    """Restore the root and audit loggers after a test that calls setup_logging in this process."""
    root, audit = logging.getLogger(), logging.getLogger(AUDIT_LOGGER)
    saved = (root.handlers[:], root.level, audit.handlers[:], audit.level, audit.propagate)
    alembic = logging.getLogger("alembic").level
    yield
    logging.captureWarnings(False)
    logging.getLogger("alembic").setLevel(alembic)
    for h in root.handlers + audit.handlers:
        if h not in saved[0] and h not in saved[2]:
            h.close()
    root.handlers[:], audit.handlers[:] = saved[0], saved[2]
    root.setLevel(saved[1])
    audit.setLevel(saved[3])
    audit.propagate = saved[4]


def test_json_formatter_fields_extra_and_exception() -> None:
    fmt = JsonFormatter()
    rec = logging.LogRecord("hivemesh.x", logging.WARNING, __file__, 1, "a %s b", ("é",), None)
    rec.user, rec.ms, rec.obj = "alice", 1.5, object()  # extra fields; one JSON cannot hold
    doc = json.loads(fmt.format(rec))
    assert {k: doc[k] for k in ("level", "logger", "message", "user", "ms")} == {
        "level": "WARNING",
        "logger": "hivemesh.x",
        "message": "a é b",
        "user": "alice",
        "ms": 1.5,
    }
    assert list(doc)[:4] == ["ts", "level", "logger", "message"]
    assert doc["obj"].startswith("<object object")
    assert re.match(TS, doc["ts"]), doc["ts"]
    assert "exception" not in doc and "args" not in doc and "msg" not in doc
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    line = fmt.format(rec)
    assert "\n" not in line  # one object per line, the traceback escaped inside it
    assert "Traceback" in json.loads(line)["exception"] and "boom" in json.loads(line)["exception"]


def test_log_format_settings_and_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert load_config().metastore.log_format == "text"
    monkeypatch.setenv("HIVEMESH_METASTORE_LOG_FORMAT", "JSON")
    assert load_config().metastore.log_format == "json"
    with pytest.raises(ConfigError, match="metastore.log_format"):
        load_config(metastore__log_format="xml")
    mesh = write_mesh(
        tmp_path / "mesh.yaml", {"audit_log": "logs/audit.log"}, {"name": "m", "uris": ["thrift://m:1"]}, []
    )
    proxy = load_federation_config(mesh).proxy
    assert (proxy.log_format, proxy.audit_log) == ("text", str(tmp_path.resolve() / "logs/audit.log"))
    monkeypatch.setenv("HIVEMESH_PROXY_LOG_FORMAT", "json")
    monkeypatch.setenv("HIVEMESH_PROXY_AUDIT_LOG", "false")
    proxy = load_federation_config(mesh).proxy
    assert (proxy.log_format, proxy.audit_log) == ("json", False)
    assert load_federation_config(mesh, audit_log="/var/log/a.log").proxy.audit_log == "/var/log/a.log"


def test_audit_sink_setup(tmp_path: Path, clean_logging: None, capsys: pytest.CaptureFixture[str]) -> None:
    audit_file = tmp_path / "audit.log"
    setup_logging("WARNING", "json", str(audit_file))
    logging.getLogger(AUDIT_LOGGER).info("user=%s", "bob", extra={"user": "bob"})
    logging.getLogger("hivemesh.other").warning("to stderr")
    err = capsys.readouterr().err
    assert "user=bob" not in err and json.loads(err.strip())["message"] == "to stderr"
    doc = json.loads(audit_file.read_text().strip())  # written at INFO although the log is at WARNING
    assert (doc["logger"], doc["user"], doc["message"]) == (AUDIT_LOGGER, "bob", "user=bob")
    setup_logging("INFO", "text")  # without a file: back into the normal log, the file handler closed
    assert logging.getLogger(AUDIT_LOGGER).propagate and not logging.getLogger(AUDIT_LOGGER).handlers


def _json_lines(path: Path) -> list[dict[str, object]]:
    docs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)  # every line is one JSON object
        assert KEYS <= set(doc), line
        docs.append(doc)
    return docs


def test_metastore_log_format_json(tmp_path: Path) -> None:
    """``hivemesh metastore --log-format json``: every stderr line, from start to stop, is JSON."""
    err = tmp_path / "stderr.log"
    cmd = [
        sys.executable, "-m", "hivemesh.cli", "metastore", "--port", "0", "--log-level", "INFO",
        "--db", f"sqlite:///{tmp_path / 'm.db'}", "--warehouse", str(tmp_path / "wh"), "--log-format", "json",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVEMESH_METASTORE_")}
    with open(err, "w", encoding="utf-8") as errf:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=errf, text=True, env=env, preexec_fn=die_with_parent
        )
        try:
            assert proc.stdout is not None
            ready: list[str] = []
            reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
            reader.start()
            reader.join(60)
            assert ready and "hivemesh metastore listening on" in ready[0], err.read_text()
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(20) == 0
    docs = _json_lines(err)
    assert [d["message"] for d in docs][-2:] == ["received SIGTERM, stopping", "stopped"]
    assert any(str(d["message"]).startswith("metastore on thrift://") for d in docs)
    assert {d["level"] for d in docs} == {"INFO"}


def test_proxy_audit_log_file_json(tmp_path: Path) -> None:
    """``hivemesh proxy --audit-log FILE --log-format json``: audit records go to FILE only, as
    JSON objects with their fields; the text form of the line is the message."""
    zone = tmp_path / "main"
    mesh = write_mesh(
        tmp_path / "mesh.yaml",
        {"port": 0, "store": f"sqlite:///{tmp_path / 'proxy.db'}"},
        {"name": "main", "embedded": {"db": f"sqlite:///{zone / 'm.db'}", "warehouse": str(zone / "wh")}},
        [],
    )
    audit, log = tmp_path / "audit" / "audit.log", tmp_path / "proxy.log"
    audit.parent.mkdir()
    args = ["--audit-log", str(audit), "--log-format", "json", "--log-level", "INFO"]
    with ProxyProcess(mesh, log, args) as p, ThriftClient(p.host, p.port) as c:
        c.set_ugi("alice", [])
        assert "default" in c.get_all_databases()
        with pytest.raises(NoSuchObjectException):
            c.get_database("missing")
        with MetastoreClient(f"thrift://{p.host}:{p.port}", user="bob") as bob:  # sends set_ugi itself
            bob.call("get_all_tables", "default")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "get_all_tables" not in audit.read_text():
            time.sleep(0.05)
    docs = _json_lines(audit)
    assert [d["user"] for d in docs if d["method"] == "get_all_tables"] == ["bob"]
    assert {d["logger"] for d in docs} == {AUDIT_LOGGER}
    by_method = {d["method"]: d for d in docs}
    assert by_method["get_all_databases"]["user"] == "alice"
    assert by_method["get_all_databases"]["result"] == "ok"
    assert by_method["get_database"]["result"] == "NoSuchObjectException"
    assert by_method["get_database"]["member"] == "main"
    assert isinstance(by_method["get_database"]["ms"], float)
    assert str(by_method["get_database"]["message"]).startswith("user=alice peer=127.0.0.1:")
    # the proxy's own log (stderr; stdout's ready lines are copied in too) holds no audit line
    text = log.read_text()
    assert "hivemesh.audit" not in text and "method=get_all_databases" not in text
    assert any(
        json.loads(line)["message"].startswith("proxy on ") for line in text.splitlines() if line[:1] == "{"
    )


def test_failed_connects_are_reported_once_not_by_thrift(caplog: pytest.LogCaptureFixture) -> None:
    """A connection hivemesh cannot open raises its reason, and Thrift logs nothing about it (it
    used to log "Could not connect to ..." with a traceback per try); a TSocket opened outside
    hivemesh still logs as Thrift does."""
    from thrift.transport import TSocket
    from thrift.transport.TTransport import TTransportException

    from tests.support.servers import free_port

    port = free_port()
    # An in-process proxy quiets Thrift's TSocket logger for good (federation.service): undo that
    # here, whatever ran earlier in this process.
    caplog.set_level(logging.DEBUG, logger="thrift.transport.TSocket")
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(TTransportException, match="Could not connect to any of"):
            MetastoreClient(host="127.0.0.1", port=port, retries=1, retry_backoff_s=0.01)
        assert [r for r in caplog.records if r.name.startswith("thrift")] == []
        with pytest.raises(TTransportException):
            TSocket.TSocket("127.0.0.1", port).open()
    assert any(r.name == "thrift.transport.TSocket" for r in caplog.records)
