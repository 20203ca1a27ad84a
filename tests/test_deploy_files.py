"""The files under deploy/: the systemd units parse (``systemd-analyze verify`` where it exists,
else as INI) and run commands and options the CLI has; haproxy.cfg checks the health path the
metastore serves, on the port the README documents as its metrics port."""

from __future__ import annotations

import configparser
import re
import shlex
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from hivemesh.cli import main
from hivemesh.config import MetastoreConfig
from tests.support.servers import die_with_parent

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
UNITS = {"hivemesh-metastore.service": "metastore", "hivemesh-proxy.service": "proxy"}


def _unit(name: str) -> configparser.ConfigParser:
    ini = configparser.ConfigParser(interpolation=None, strict=False)
    ini.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    ini.read_string((DEPLOY / name).read_text(encoding="utf-8"))
    return ini


@pytest.mark.parametrize("name", sorted(UNITS))
def test_unit_runs_a_real_command(name: str) -> None:
    service = _unit(name)["Service"]
    argv = shlex.split(service["ExecStart"])
    assert argv[0].endswith("/bin/hivemesh") and argv[1] == UNITS[name]
    assert argv[2:4] == ["--config", "/etc/hivemesh/mesh.yaml"]
    help_text = CliRunner().invoke(main, [UNITS[name], "--help"]).output
    flags = [a.split("=", 1)[0] for a in argv[2:] if a.startswith("--")]
    assert flags and [f for f in flags if not re.search(rf"(^|[\s,/]){re.escape(f)}\b", help_text)] == []
    assert service["Type"] == "simple" and service["Restart"] == "on-failure"
    assert service["User"] == "hivemesh" and int(service["LimitNOFILE"]) >= 65536
    assert service["NoNewPrivileges"] == "yes" and service["ProtectSystem"] == "strict"
    assert "/var/lib/hivemesh" in service["ReadWritePaths"].split()
    if UNITS[name] == "metastore":
        assert "ExecReload" not in service  # SIGHUP reloads nothing in the metastore
    else:
        assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"  # the proxy re-reads its file
        audit = argv[argv.index("--audit-log") + 1]
        assert any(audit.startswith(p + "/") for p in service["ReadWritePaths"].split())


@pytest.mark.parametrize("name", sorted(UNITS))
def test_unit_verifies(name: str, tmp_path: Path) -> None:
    """``systemd-analyze verify`` (it wants ExecStart's program to exist: the test's hivemesh).
    Where there is no systemd the INI checks above stand alone (no skip: CI fails on skips)."""
    if shutil.which("systemd-analyze") is None:
        return
    hivemesh = Path(sys.executable).with_name("hivemesh")
    assert hivemesh.exists()
    unit = tmp_path / name
    unit.write_text((DEPLOY / name).read_text().replace("/opt/hivemesh/bin/hivemesh", str(hivemesh)))
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=120
    )
    problems = [line for line in done.stderr.splitlines() if name in line]  # not other units'
    assert done.returncode == 0 and problems == [], done.stderr


def _haproxy() -> dict[str, list[str]]:
    """haproxy.cfg as {section header: its lines}, comments removed."""
    sections: dict[str, list[str]] = {}
    current = ""
    for raw in (DEPLOY / "haproxy.cfg").read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not line[0].isspace():
            current = line.strip()
            sections[current] = []
        else:
            sections[current].append(" ".join(line.split()))
    return sections


def test_haproxy_checks_the_documented_health_endpoint(tmp_path: Path) -> None:
    cfg = _haproxy()
    backend = next(lines for head, lines in cfg.items() if head.startswith("backend "))
    assert "mode tcp" in backend and "balance leastconn" in backend
    check = next(line for line in backend if line.startswith("option httpchk"))
    method, path = check.split()[2:4]
    assert (method, path) == ("GET", "/health")
    assert "http-check expect status 200" in backend
    servers = [line.split() for line in backend if line.startswith("server ")]
    assert len(servers) >= 2
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    documented = re.search(r"^\s*metrics_port: (\d+)\s+# Prometheus /metrics and /health", readme, re.M)
    assert documented, "README's metastore: example documents metrics_port"
    metrics_port = int(documented.group(1))
    for server in servers:
        assert server[2].endswith(f":{MetastoreConfig().port}")  # Thrift on the default port
        assert "check" in server and server[server.index("port") + 1] == str(metrics_port)
    assert "--metrics-port" in CliRunner().invoke(main, ["metastore", "--help"]).output
    assert f"metrics_port: {metrics_port}" in (DEPLOY / "haproxy.cfg").read_text()
    # a running metastore answers that path on its metrics port with 200
    cmd = [
        sys.executable, "-m", "hivemesh.cli", "metastore", "--port", "0", "--metrics-port", "0",
        "--db", f"sqlite:///{tmp_path / 'm.db'}", "--warehouse", str(tmp_path / "wh"), "--log-level", "WARNING",
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, preexec_fn=die_with_parent
    )
    try:
        found: list[str] = []

        def _read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                m = re.search(r"metrics on (http://\S+)/metrics", line)
                if m:
                    found.append(m.group(1))
                    return

        reader = threading.Thread(target=_read, daemon=True)
        reader.start()
        reader.join(60)
        assert found, "the metastore printed no metrics address"
        with urllib.request.urlopen(found[0] + path, timeout=10) as r:
            assert r.status == 200
    finally:
        proc.terminate()
        proc.wait(20)

    if shutil.which("haproxy") is not None:  # haproxy's own check where it is installed
        done = subprocess.run(
            ["haproxy", "-c", "-f", str(DEPLOY / "haproxy.cfg")], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stdout + done.stderr
