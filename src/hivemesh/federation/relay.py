"""Relaying: reads whose reply needs no change are answered with the member's reply bytes.

A read that names no renamed, filtered or remote database, sent to a member reached over unframed
binary Thrift, is answered with the member's reply message as it came (only its sequence id
changed): a 1,000-partition answer is skipped over in C instead of built as ~10,000 Python objects
and encoded again. Anything else takes the normal path, which then answers the call.
"""

from __future__ import annotations

import struct
import time
from typing import Any

from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType, TType
from thrift.transport import TTransport

from hivemesh.federation.access import is_read
from hivemesh.federation.compat import FALLBACKS
from hivemesh.federation.members import Member, MemberUnavailableError
from hivemesh.federation.rewrite import Collector, method_plan, rename_args, split_catalog
from hivemesh.federation.routes import PRIMARY, ROUTES
from hivemesh.federation.routing import TABLE_LIST_METHODS, MemberCalls, current
from hivemesh.hive.hms_methods import positional_args, result_field_class


def relayable(routed: frozenset[str]) -> frozenset[str]:
    """The calls among ``routed`` (generically routed calls) whose replies may be relayed: reads."""
    return frozenset(m for m in routed if is_read(m))


class Relay:
    """Relays replies of members of ``fed`` (see the module doc)."""

    def __init__(self, fed: MemberCalls):
        self.fed = fed

    def __call__(self, method: str, args: Any, seqid: int, oprot: Any) -> bool | str:
        """Answer ``method`` (decoded ``<method>_args`` struct ``args``) on ``oprot`` with a
        member's reply bytes. Returns False when the call must take the normal path (nothing was
        written), True when relayed, or the name of the HMS exception the relayed reply carries
        (for metrics and the audit log)."""
        fed = self.fed
        member = fed.registry.primary
        if ROUTES[method].strategy is not PRIMARY:
            target = self._plain_target(method, args)
            if target is None:
                return False
            member = target
        if not member.relays or not member.available or method in member.missing:
            return False
        current.member = member.name
        t0 = time.perf_counter()
        try:
            raw = member.relay(fed.session(), method, args)
        except MemberUnavailableError:
            if fed.observe is not None:
                fed.observe(member.name, method, time.perf_counter() - t0, "Unavailable")
            return False  # the normal path answers with the MetaException naming the member
        mtype, offset = message_header(raw)
        error: str | None = None
        if mtype == TMessageType.EXCEPTION:
            if method in FALLBACKS and application_error(raw).type == TApplicationException.UNKNOWN_METHOD:
                member.missing.add(method)
                return False  # the normal path answers with the older call
            error = "TApplicationException"
        else:
            error = result_exception(method, raw, offset + 4)
        if fed.observe is not None:
            fed.observe(member.name, method, time.perf_counter() - t0, error)
        oprot.trans.write(with_seqid(raw, offset, seqid))
        oprot.trans.flush()
        return error or True

    def _plain_target(self, method: str, args: Any) -> Member | None:
        """The member a call naming databases goes to when its reply needs no change (no
        catalog form, renaming, filtering, remote or table links), else None."""
        fed = self.fed
        col = Collector()
        rename_args(method_plan(method), positional_args(args), col)
        if any(d.startswith("@") for d in col.dbs):
            return None
        try:
            member, real_db, client_db = fed.target(method, col)
        except Exception:
            return None
        names = member.names
        if member.remote_spec is not None or names.renames or names.filters_tables:
            return None
        if real_db is not None and not names.exposes(real_db):
            return None
        linked = (
            method in TABLE_LIST_METHODS
            and fed.links is not None
            and client_db is not None
            and fed.links.tables_in(split_catalog(client_db)[1].lower())
        )
        return None if linked else member  # table links of that database are added to the list


def message_header(raw: bytes) -> tuple[int, int]:
    """(message type, offset of the seqid) of a binary-protocol message."""
    version = int.from_bytes(raw[0:4], "big", signed=True)
    if version < 0:  # strict header: version | type, name, seqid
        return version & 0xFF, 8 + int.from_bytes(raw[4:8], "big")
    return raw[4 + version], 4 + version + 1


def with_seqid(raw: bytes, offset: int, seqid: int) -> bytes:
    """``raw`` with the 4-byte seqid at ``offset`` replaced by ``seqid``."""
    return raw[:offset] + struct.pack("!i", seqid) + raw[offset + 4 :]


def application_error(raw: bytes) -> TApplicationException:
    """The TApplicationException an EXCEPTION message carries."""
    proto = TBinaryProtocol.TBinaryProtocolAccelerated(TTransport.TMemoryBuffer(raw))
    proto.readMessageBegin()
    ex = TApplicationException()
    ex.read(proto)
    return ex


def result_exception(method: str, raw: bytes, at: int) -> str | None:
    """Class name of the exception field a result struct starts with (None: a success);
    ``at``: offset of the struct in ``raw``."""
    if len(raw) < at + 3 or raw[at] == TType.STOP:
        return None
    fid = int.from_bytes(raw[at + 1 : at + 3], "big", signed=True)
    if fid == 0:
        return None
    cls = result_field_class(method, fid)
    return cls.__name__ if cls is not None else "HMSException"
