"""How hivemesh reaches HDFS: throughput of one large copy local -> HDFS and HDFS -> local by each
client that runs here, side by side, with ratios to hivemesh's default.

    .venv/bin/python bench/hdfs.py [--mb 1024] [--hdfs hdfs://host:port --http-port N] [--no-jvm]
                                   [--json out.json]

Starts the test suite's HDFS mini cluster (one NameNode, one DataNode, on this machine; see
``tests/support/hdfs.py``) unless ``--hdfs`` names a running one. One file of ``--mb`` MiB (random
bytes) is copied from a local directory to HDFS and back by each candidate, once, after the
cluster's warm-up (two round trips of up to 256 MiB) and one 8 MiB copy by the candidate; every
copy is checked by size, the round trip by MD5 at the end. Candidates:

- **native**: hivemesh's storage layer (``hdfs-native``, a Rust client of HDFS's own protocols,
  through :class:`hivemesh.storage.hdfs.NativeHdfsHandler`), copying as replication does
  (:func:`hivemesh.storage.copy.copy_file`: a temporary name, then a rename). The default.
- **native-direct**: the same client alone (8 MiB reads and writes to a Python file, no temporary
  name, no rename): what hivemesh's copy path costs on top of the client.
- **webhdfs**: fsspec's WebHDFS client wrapped as a pyarrow file system
  (``PyFileSystem(FSSpecHandler(...))``), same copy path; needs the NameNode's HTTP port.
- **jvm**: Hadoop's own Java client (``FileUtil.copy`` in a JVM of its own; the copy alone is
  timed, the JVM's start is reported beside it).
- **libhdfs**: ``pyarrow.fs.HadoopFileSystem``; runs only where ``libhdfs.so`` and a Hadoop class
  path are installed (``HIVEMESH_HDFS_CLIENT=libhdfs``), else reported as not runnable, with why.

Ratio = candidate MB/s / native MB/s. No assertion on timing: the numbers are for reading.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow.fs as pafs  # noqa: E402
from tests.support.hdfs import HdfsCluster, java_copy  # noqa: E402

from hivemesh.jvm import find_java  # noqa: E402
from hivemesh.storage.copy import CHUNK, copy_file  # noqa: E402
from hivemesh.storage.hdfs import hdfs_filesystem, split_hdfs_location  # noqa: E402

MiB = 1024 * 1024


def _md5_local(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _make_file(path: Path, mb: int) -> None:
    block = os.urandom(MiB)
    with open(path, "wb") as f:
        for i in range(mb):
            f.write(block[i % 251 :] + block[: i % 251])  # distinct MiBs, cheap to make


def _pyarrow_copy(hdfs: pafs.FileSystem) -> Callable[[str, str, str], int]:
    """A copy between a local path and an HDFS path by hivemesh's replication copy."""
    local = pafs.LocalFileSystem()

    def copy(direction: str, src: str, dst: str) -> int:
        if direction == "up":
            return copy_file(local, src, hdfs, dst)
        return copy_file(hdfs, src, local, dst)

    return copy


def _direct_copy(authority: str) -> Callable[[str, str, str], int]:
    from hdfs_native import Client, WriteOptions

    client = Client(f"hdfs://{authority}")

    def copy(direction: str, src: str, dst: str) -> int:
        n = 0
        if direction == "up":
            with (
                open(src, "rb") as f,
                client.create(dst, WriteOptions(overwrite=True, create_parent=True)) as w,
            ):
                while chunk := f.read(CHUNK):
                    w.write(chunk)
                    n += len(chunk)
        else:
            with client.read(src) as r, open(dst, "wb") as out:
                while chunk := r.read(CHUNK):
                    out.write(chunk)
                    n += len(chunk)
        return n

    return copy


def _webhdfs(http_port: int) -> pafs.FileSystem:
    from fsspec.implementations.webhdfs import WebHDFS
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    user = os.environ.get("USER") or os.environ.get("LOGNAME") or "root"
    return PyFileSystem(FSSpecHandler(WebHDFS("127.0.0.1", port=http_port, user=user)))


def _time(fn: Callable[[], int]) -> tuple[int, float]:
    began = time.perf_counter()
    n = fn()
    return n, time.perf_counter() - began


def run(uri: str, http_port: int | None, mb: int, work: Path, jvm: bool = True) -> dict[str, Any]:
    """Every candidate's copies of one ``mb`` MiB file; returns ``{candidate: {up_mbs, down_mbs,
    ...} or {error}}``."""
    authority, base = split_hdfs_location(uri.rstrip("/") + "/hivemesh-bench")
    source = work / "source.bin"
    _make_file(source, mb)
    warm = work / "warm.bin"
    _make_file(warm, 8)
    want_md5 = _md5_local(source)
    candidates: dict[str, Callable[[str, str, str], int] | str] = {}
    candidates["native"] = _pyarrow_copy(hdfs_filesystem(authority, "native"))
    candidates["native-direct"] = _direct_copy(authority)
    if http_port:
        candidates["webhdfs"] = _pyarrow_copy(_webhdfs(http_port))
    else:
        candidates["webhdfs"] = "not runnable: no --http-port for the NameNode's WebHDFS"
    if not os.environ.get("JAVA_HOME"):  # so that a missing libhdfs, not libjvm, is what fails
        os.environ["JAVA_HOME"] = str(Path(os.path.realpath(find_java(17))).parents[1])
    try:
        candidates["libhdfs"] = _pyarrow_copy(hdfs_filesystem(authority, "libhdfs"))
    except Exception as e:  # no libhdfs.so / Hadoop class path: the reason is the result
        candidates["libhdfs"] = f"not runnable: {str(e).splitlines()[0]}"
    # the DataNode's JIT warms up on the first large transfers: do them before timing anything,
    # or the first candidate pays for it (seen as half the read speed of the same client)
    warm_up = work / "warm-up.bin"
    _make_file(warm_up, min(mb, 256))
    direct = _direct_copy(authority)
    for _ in range(2):
        direct("up", str(warm_up), f"{base}/warm-up.bin")
        direct("down", f"{base}/warm-up.bin", str(work / "warm-up-back.bin"))
    warm_up.unlink()
    (work / "warm-up-back.bin").unlink()
    results: dict[str, Any] = {}
    for name, copy in candidates.items():
        if isinstance(copy, str):
            results[name] = {"error": copy}
            print(f"{name:14s} {copy}", flush=True)
            continue
        remote, back = f"{base}/{name}/data.bin", work / f"{name}.bin"
        try:
            copy("up", str(warm), f"{base}/{name}/warm.bin")
            n_up, up_s = _time(lambda: copy("up", str(source), remote))  # noqa: B023
            n_down, down_s = _time(lambda: copy("down", remote, str(back)))  # noqa: B023
        except Exception as e:
            results[name] = {"error": f"failed: {str(e).splitlines()[0]}"}
            print(f"{name:14s} failed: {e}", flush=True)
            continue
        ok = n_up == n_down == mb * MiB and back.stat().st_size == mb * MiB and _md5_local(back) == want_md5
        back.unlink()
        results[name] = {
            "up_mbs": mb / up_s,
            "down_mbs": mb / down_s,
            "up_s": up_s,
            "down_s": down_s,
            "ok": ok,
        }
    # the JVM helper: Hadoop's own client, the copy alone timed inside the JVM
    try:
        if not jvm:
            raise RuntimeError("not run (--no-jvm)")
        began = time.perf_counter()
        java_copy(f"file:{warm}", f"hdfs://{authority}{base}/jvm/warm.bin")
        jvm_start = time.perf_counter() - began
        n_up, up_s = java_copy(f"file:{source}", f"hdfs://{authority}{base}/jvm/data.bin")
        back = work / "jvm.bin"
        n_down, down_s = java_copy(f"hdfs://{authority}{base}/jvm/data.bin", f"file:{back}")
        ok = n_up == n_down == mb * MiB and _md5_local(back) == want_md5
        back.unlink()
        results["jvm"] = {
            "up_mbs": mb / up_s,
            "down_mbs": mb / down_s,
            "up_s": up_s,
            "down_s": down_s,
            "ok": ok,
            "jvm_8mib_copy_s": jvm_start,
        }
    except Exception as e:
        results["jvm"] = {"error": f"failed: {str(e).splitlines()[0]}"}
    hdfs_filesystem(authority, "native").delete_dir(base)
    return results


def report(results: dict[str, Any], mb: int) -> None:
    """One line per candidate: MB/s each way and the ratio to ``native``."""
    ref = results.get("native", {})
    print(f"\n1 file of {mb} MiB; ratio = candidate MB/s / native MB/s")
    print(
        f"{'candidate':14s} {'local->HDFS MB/s':>17s} {'ratio':>6s} {'HDFS->local MB/s':>17s} {'ratio':>6s}  ok"
    )
    for name, r in results.items():
        if "error" in r:
            print(f"{name:14s} {r['error']}")
            continue
        up_ratio = r["up_mbs"] / ref["up_mbs"] if "up_mbs" in ref else float("nan")
        down_ratio = r["down_mbs"] / ref["down_mbs"] if "down_mbs" in ref else float("nan")
        extra = f"  (JVM start + 8 MiB copy: {r['jvm_8mib_copy_s']:.1f} s)" if "jvm_8mib_copy_s" in r else ""
        print(
            f"{name:14s} {r['up_mbs']:17.0f} {up_ratio:6.2f} {r['down_mbs']:17.0f} {down_ratio:6.2f}  "
            f"{'yes' if r['ok'] else 'NO'}{extra}"
        )


def main() -> None:
    """Parse the options, start (or use) an HDFS, run, print, write ``--json``."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=1024, help="size of the file copied, MiB (default 1024)")
    ap.add_argument("--hdfs", help="a running HDFS (hdfs://host:port) instead of a mini cluster")
    ap.add_argument("--http-port", type=int, help="with --hdfs: the NameNode's HTTP port (WebHDFS)")
    ap.add_argument(
        "--no-jvm", action="store_true", help="leave out the JVM candidate (a JVM start per copy)"
    )
    ap.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hivemesh-bench-hdfs-"))
    cluster = None
    try:
        if args.hdfs:
            uri, http_port = args.hdfs, args.http_port
        else:
            cluster = HdfsCluster(work / "cluster", heap="1g").start()
            print(f"HDFS mini cluster up in {cluster.start_seconds:.1f} s at {cluster.uri}", flush=True)
            uri, http_port = cluster.uri, cluster.http_port
        results = run(uri, http_port, args.mb, work, jvm=not args.no_jvm)
        report(results, args.mb)
        if args.json_out:
            args.json_out.write_text(json.dumps({"mb": args.mb, "results": results}, indent=2))
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
