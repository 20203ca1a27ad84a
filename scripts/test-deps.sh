#!/usr/bin/env bash
# The Debian packages the test suite starts itself (`make test` calls this before pytest):
# PostgreSQL's binaries (a private cluster per test session), OpenSSH's sshd (SSH tunnel tests),
# MIT Kerberos (the headers gssapi builds against, and a KDC per test session), etcd (a 3-member
# cluster per test session for Live Hive's command log), Maven (fetches the
# Hive 4, Hive streaming, Delta and Trino jars from Maven Central into ~/.cache/hivemesh/jvm on
# first use) and a JDK with javac (the JVM ACID reader, Hive's streaming writer).
# As root, installs what is missing; otherwise stops with the exact apt-get line to run.
set -euo pipefail

missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
[ -e /usr/include/gssapi/gssapi.h ] || missing+=(libkrb5-dev)
[ -x /usr/sbin/krb5kdc ] || missing+=(krb5-kdc)
[ -x /usr/sbin/kadmin.local ] || missing+=(krb5-admin-server)
command -v kinit >/dev/null 2>&1 || missing+=(krb5-user)
[ -x /usr/bin/etcd ] || missing+=(etcd-server)
[ ${#missing[@]} -eq 0 ] && exit 0

line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "make test needs these Debian packages; run as root first:" >&2
  echo "  sudo $line" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive  # krb5-config would otherwise ask for a default realm
echo "installing Debian packages the tests need: ${missing[*]}" >&2
# A package list may be missing or stale on a fresh machine: update once if the first try fails.
$line >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && $line >/dev/null; }
# The Debian package may start its own cluster on 5432: the tests never use it.
# So may etcd-server start its own etcd on 2379: the tests start their own members on free ports.
