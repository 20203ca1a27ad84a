"""A real MIT Kerberos KDC for tests: a realm created in a temp dir, ``krb5kdc`` on a free port.

Debian's ``krb5-kdc`` and ``krb5-admin-server`` (``kdb5_util``, ``kadmin.local``, ``krb5kdc``) and
``krb5-user`` (``kinit``) must be installed (``.ci/run`` installs them). :meth:`Kdc.env` gives the
variables a process needs to use the realm (``KRB5_CONFIG``; Java reads
``-Djava.security.krb5.conf``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.support.servers import die_with_parent, free_port

REALM = "HIVEMESH.TEST"
BINARIES = ("/usr/sbin/krb5kdc", "/usr/sbin/kdb5_util", "/usr/sbin/kadmin.local")
KDC_SKIP_REASON = (
    "needs MIT Kerberos: Debian's krb5-kdc, krb5-admin-server and krb5-user (CI installs them, see .ci/run)"
)


def kdc_available() -> bool:
    """True when the KDC's binaries and kinit are installed."""
    return all(Path(b).exists() for b in BINARIES) and shutil.which("kinit") is not None


class Kdc:
    """A running KDC of realm :data:`REALM` with its database, config and keytabs under ``root``."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.port = free_port()
        self.krb5_conf = self.root / "krb5.conf"
        self.kdc_conf = self.root / "kdc.conf"
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        """Variables that point Kerberos libraries at this realm."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def _run(self, *cmd: str) -> str:
        r = subprocess.run(
            list(cmd), env={**os.environ, **self.env()}, capture_output=True, text=True, timeout=60
        )
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr or r.stdout}")
        return r.stdout

    def start(self) -> Kdc:
        """Create the realm and start ``krb5kdc`` (foreground, a child of this process)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.krb5_conf.write_text(
            f"""[libdefaults]
  default_realm = {REALM}
  dns_lookup_realm = false
  dns_lookup_kdc = false
  dns_canonicalize_hostname = false
  rdns = false
  udp_preference_limit = 1
  ticket_lifetime = 2h
  forwardable = true
  default_ccache_name = FILE:{self.root}/default.ccache

[realms]
  {REALM} = {{
    kdc = 127.0.0.1:{self.port}
    admin_server = 127.0.0.1:{self.port}
  }}

[domain_realm]
  localhost = {REALM}
  127.0.0.1 = {REALM}
"""
        )
        self.kdc_conf.write_text(
            f"""[kdcdefaults]
  kdc_ports = {self.port}
  kdc_tcp_ports = {self.port}

[realms]
  {REALM} = {{
    database_name = {self.root}/principal
    key_stash_file = {self.root}/stash
    acl_file = {self.root}/kadm5.acl
    max_life = 2h
    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  }}

[logging]
  kdc = FILE:{self.root}/kdc.log
"""
        )
        (self.root / "kadm5.acl").write_text("")
        self._run("/usr/sbin/kdb5_util", "create", "-s", "-r", REALM, "-P", "master-password")
        self.proc = subprocess.Popen(
            ["/usr/sbin/krb5kdc", "-n", "-r", REALM],
            env={**os.environ, **self.env()},
            stdout=subprocess.DEVNULL,
            stderr=open(self.root / "krb5kdc.err", "ab"),  # noqa: SIM115 - kept for the process's life
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"krb5kdc did not start: {(self.root / 'krb5kdc.err').read_text()}"
                    ) from None
                time.sleep(0.1)
        return self

    def add_principal(self, principal: str, keytab: Path | None = None) -> Path:
        """Create ``principal`` with a random key and export it to ``keytab`` (default
        ``<root>/<principal with / as _>.keytab``); returns the keytab."""
        keytab = keytab or self.root / (principal.replace("/", "_") + ".keytab")
        self._run("/usr/sbin/kadmin.local", "-r", REALM, "-q", f"addprinc -randkey {principal}@{REALM}")
        self._run("/usr/sbin/kadmin.local", "-r", REALM, "-q", f"ktadd -k {keytab} {principal}@{REALM}")
        return keytab

    def kinit(self, principal: str, keytab: Path, ccache: Path) -> Path:
        """A ticket cache file for ``principal`` from its keytab."""
        self._run("kinit", "-kt", str(keytab), "-c", f"FILE:{ccache}", f"{principal}@{REALM}")
        return ccache

    def stop(self) -> None:
        """Stop the KDC."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
