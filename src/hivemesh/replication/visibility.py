"""Directories with a ``_v<txnId>`` visibility suffix, as they go to the target.

Hive 4's compactor writes its result into ``base_<w>_v<T>`` (or ``delta_<a>_<b>_v<T>``), ``T``
being the compaction's own txn: readers use the directory only once ``T`` is committed in their
ValidTxnList. ``T`` is a *source* txn id, meaningless on the target (whose txn ids are its own), so
a replicated directory keeps its suffix only at its peril: on the target ``T`` may be open, unknown
or another txn. Hence :func:`target_relpath`:

* while ``T`` is not committed at the source (the compactor still writing, or aborted), the
  directory is not copied: source readers do not use it either;
* once ``T`` is committed it is copied without the suffix (``base_0000003_v0000042`` becomes
  ``base_0000003``), a directory every reader may use, which the source's readers now do too. A
  compacted base stays recognisable as one by its ``_metadata_acid`` file, copied with it.
"""

from __future__ import annotations

from collections.abc import Callable

from hivemesh.acid.names import VISIBILITY_PREFIX, parse_acid_dir
from hivemesh.hive.txn_lists import ValidTxnList

__all__ = ["TxnSnapshot", "target_relpath"]


class TxnSnapshot:
    """The source's ValidTxnList, fetched on first use (by ``fetch``) and then kept."""

    def __init__(self, fetch: Callable[[], ValidTxnList]):
        self._fetch = fetch
        self._txns: ValidTxnList | None = None

    def committed(self, txn_id: int) -> bool:
        """Whether source txn ``txn_id`` is committed (Hive ``isTxnValid``). Raises what ``fetch`` raises
        on first use (the source's transport errors)."""
        if self._txns is None:
            self._txns = self._fetch()
        return self._txns.is_txn_valid(txn_id)


def target_relpath(relpath: str, txns: TxnSnapshot | None) -> str | None:
    """The target's path for a file at ``relpath`` (posix, below a table or partition directory)
    of the source: ``_v<T>`` suffixes of its directories dropped when ``T`` is committed at the
    source; None when one is not (the file is not to be copied yet). Without ``txns`` the path is
    kept as it is. Raises as :meth:`TxnSnapshot.committed`, which it calls only for a ``_v<T>`` directory."""
    if txns is None or VISIBILITY_PREFIX not in relpath:
        return relpath
    parts = relpath.split("/")
    for i, part in enumerate(parts[:-1]):
        d = parse_acid_dir(part)
        if d is None or d.visibility_txn_id <= 0:
            continue
        if not txns.committed(d.visibility_txn_id):
            return None
        parts[i] = part[: part.rindex(VISIBILITY_PREFIX)]
    return "/".join(parts)
