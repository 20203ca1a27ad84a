"""A Thrift processor for the HMS interface that dispatches to any catalog object.

The generated ``ThriftHiveMetastore.Processor`` knows every method of the Hive 4 IDL. This subclass
answers ``TApplicationException(UNKNOWN_METHOD)`` ("Invalid method name: 'x'") for every method the
handler does not implement, as the Java HMS does for methods it does not have (Spark and Trino fall
back to older calls on exactly that), turns unexpected handler errors into the ``MetaException``
clients expect instead of an opaque internal error, and counts calls for metrics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import MetaException
from thrift.Thrift import TApplicationException, TException, TMessageType, TType
from thrift.transport import TTransport

from hivemesh.hive.hms_methods import (
    args_struct,
    argument_problem,
    declared_exceptions,
    implemented_methods,
    positional_args,
    result_struct,
    returns_value,
)

log = logging.getLogger("hivemesh.thrift")

_HMS_ARGS = frozenset(
    n for n in dir(ThriftHiveMetastore) if n.endswith("_args") for n in [n[: -len("_args")]]
)
"""Methods of the HMS IDL itself (not fb303's): answered by :meth:`HMSProcessor._answer`."""

_outcome = threading.local()  # the HMS exception (if any) the current call answered with

CallObserver = Callable[[str, float, str | None], None]
"""Called after each call with (method, seconds, error class name or None)."""


def short_error(e: BaseException) -> str:
    """``Type: first line`` of an error; for SQLAlchemy errors the driver's message, no SQL text."""
    orig = getattr(e, "orig", None)
    source = orig if isinstance(orig, BaseException) else e
    text = str(source).strip().splitlines()
    return f"{type(source).__name__}: {text[0] if text else ''}".rstrip(": ")


class _GuardedHandler:
    """Wraps a handler so unexpected Python errors surface as MetaException where declared."""

    def __init__(self, handler: object, methods: frozenset[str]):
        self._handler = handler
        for name in methods:
            setattr(self, name, self._guard(name, getattr(handler, name)))

    @staticmethod
    def _guard(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        declared = tuple(declared_exceptions(name).values())
        can_meta = MetaException in declared

        def call(*args: Any) -> Any:
            """The handler method, with unexpected errors turned into MetaException."""
            problem = argument_problem(name, args)
            if problem is not None:  # refused at the boundary, with what a Java server answers
                unreadable, text = problem
                log.info("%s refused: %s", name, text)
                if not unreadable and can_meta:
                    _outcome.error = "MetaException"
                    raise MetaException(f"Invalid request to {name}: {text}")
                _outcome.error = "TApplicationException"
                if unreadable:
                    raise TApplicationException(TApplicationException.PROTOCOL_ERROR, text)
                raise TApplicationException(
                    TApplicationException.INTERNAL_ERROR, f"Internal error processing {name}: {text}"
                )
            try:
                return fn(*args)
            except declared as e:
                _outcome.error = type(e).__name__  # answered as a result, counted as an error
                raise
            except TApplicationException:
                raise
            except TException as e:
                # An HMS exception the method does not declare cannot travel as a result: as a
                # MetaException where the method declares one, else (open_txns,
                # get_next_notification ...) its message the way Java servers send theirs.
                _outcome.error = type(e).__name__
                msg = getattr(e, "message", None) or str(e)
                log.info("%s: %s: %s", name, type(e).__name__, msg)
                if can_meta:
                    raise MetaException(f"{type(e).__name__}: {msg}") from e
                raise TApplicationException(
                    TApplicationException.INTERNAL_ERROR, f"Internal error processing {name}: {msg}"
                ) from e
            except Exception as e:
                log.exception("%s failed", name)
                if can_meta:
                    raise MetaException(short_error(e)) from e
                raise

        call.__name__ = name
        return call


class HMSProcessor(ThriftHiveMetastore.Processor):
    """Processor for one handler object (a catalog). Thread-safe if the handler is."""

    def __init__(self, handler: object, observer: CallObserver | None = None):
        self.methods = implemented_methods(handler)
        super().__init__(_GuardedHandler(handler, self.methods))
        self._observer = observer
        # a handler may answer some calls with bytes it relays (see relay()): it lists them here
        self._relay = getattr(handler, "relay", None)
        self._relay_methods: frozenset[str] = frozenset(getattr(handler, "relay_methods", ()) or ())

    def process(self, iprot: Any, oprot: Any) -> bool | None:
        """Read one call, dispatch it (or answer UNKNOWN_METHOD), write the reply."""
        name, _type, seqid = iprot.readMessageBegin()
        if name not in self.methods:
            iprot.skip(TType.STRUCT)
            iprot.readMessageEnd()
            if _type == TMessageType.ONEWAY:
                return None
            exc = TApplicationException(
                TApplicationException.UNKNOWN_METHOD, f"Invalid method name: '{name}'"
            )
            oprot.writeMessageBegin(name, TMessageType.EXCEPTION, seqid)
            exc.write(oprot)
            oprot.writeMessageEnd()
            oprot.trans.flush()
            if self._observer:
                self._observer(name, 0.0, "UnknownMethod")
            return None
        start = time.perf_counter()
        _outcome.error = None
        error = None
        try:
            if name in self._relay_methods:
                self._process_relayable(name, seqid, iprot, oprot)
            elif name in _HMS_ARGS:
                # not the generated process_<name>: it logs a traceback at ERROR for every
                # TApplicationException, such as a member's "Invalid method name" relayed
                args = args_struct(name)()
                args.read(iprot)
                iprot.readMessageEnd()
                self._answer(name, seqid, args, oprot)
            else:  # fb303 (getName, shutdown, ...)
                self._processMap[name](self, seqid, iprot, oprot)
        except Exception as e:
            error = type(e).__name__
            raise
        finally:
            if self._observer:
                self._observer(name, time.perf_counter() - start, error or _outcome.error)
        return True

    def _process_relayable(self, name: str, seqid: int, iprot: Any, oprot: Any) -> None:
        """Decode the arguments; let the handler relay a member's reply bytes unchanged, or else
        answer as the generated ``process_<name>`` would."""
        args = args_struct(name)()
        args.read(iprot)
        iprot.readMessageEnd()
        assert self._relay is not None
        relayed = self._relay(name, args, seqid, oprot)
        if relayed:
            if isinstance(relayed, str):  # the relayed reply carries this HMS exception
                _outcome.error = relayed
            return
        self._answer(name, seqid, args, oprot)

    def _answer(self, name: str, seqid: int, args: Any, oprot: Any) -> None:
        """Call the handler with decoded ``args`` and write the reply (the generated
        ``process_<name>`` logic, for any method)."""
        result: Any = result_struct(name)()
        try:
            value = getattr(self._handler, name)(*positional_args(args))
            if returns_value(name):
                result.success = value
            msg_type = TMessageType.REPLY
        except TTransport.TTransportException:
            raise
        except TApplicationException as ex:
            msg_type = TMessageType.EXCEPTION
            result = ex
        except TException as e:
            field = next((f for f, cls in declared_exceptions(name).items() if isinstance(e, cls)), None)
            if field is None:
                log.exception("%s: undeclared exception", name)
                msg_type = TMessageType.EXCEPTION
                result = TApplicationException(TApplicationException.INTERNAL_ERROR, str(e))
            else:
                msg_type = TMessageType.REPLY
                setattr(result, field, e)
        except Exception:
            log.exception("Unexpected exception in handler")
            msg_type = TMessageType.EXCEPTION
            result = TApplicationException(TApplicationException.INTERNAL_ERROR, "Internal error")
        oprot.writeMessageBegin(name, msg_type, seqid)
        result.write(oprot)
        oprot.writeMessageEnd()
        oprot.trans.flush()
