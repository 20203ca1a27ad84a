"""Log output of the long-running commands (``hivemesh metastore``, ``hivemesh proxy``).

Two formats on stderr: ``text`` (``2025-01-31 12:00:00,123 INFO hivemesh.x: message``, as ever)
and ``json``: one object per line with ``ts`` (ISO-8601 UTC, milliseconds), ``level``,
``logger``, ``message``, ``exception`` (the traceback text, when there is one) and every field
passed with ``extra=`` (the proxy's audit lines carry ``user``, ``peer``, ``method``, ``member``,
``ms`` and ``result``). The audit logger (``hivemesh.audit``) can be given its own file
(:func:`setup_logging`'s ``audit_file``): a :class:`logging.handlers.WatchedFileHandler`, so
logrotate can move the file away, and lines no longer go to stderr as well.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
from datetime import UTC, datetime
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
AUDIT_LOGGER = "hivemesh.audit"
LOG_FORMATS = ("text", "json")

# attributes every LogRecord has: anything else on a record came from ``extra=``
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """A record as one JSON object on one line: ``ts``, ``level``, ``logger``, ``message``, then
    ``exception`` / ``stack`` when present and the record's ``extra`` fields (values JSON cannot
    hold are written as their ``str``)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a line of JSON (no newline)."""
        ts = datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds")
        out: dict[str, Any] = {
            "ts": ts.replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out.setdefault(key, value)
        return json.dumps(out, default=str, ensure_ascii=False)


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of ``log_format`` (``text`` or ``json``); raises ValueError for others."""
    if log_format == "json":
        return JsonFormatter()
    if log_format == "text":
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)} (got {log_format!r})")


def _drop_own_handlers(logger: logging.Logger) -> None:
    """Remove and close the handlers an earlier :func:`setup_logging` added to ``logger``."""
    for old in [h for h in logger.handlers if getattr(h, "_hivemesh", False)]:
        logger.removeHandler(old)
        old.close()


def setup_logging(level: str, log_format: str = "text", audit_file: str | None = None) -> None:
    """Send log records at ``level`` and above to stderr in ``log_format`` (a second call
    replaces what the first set up).

    ``audit_file``: write the ``hivemesh.audit`` records (INFO, whatever ``level`` is) to this file
    in the same format, and not to stderr; ``None`` leaves them in the normal log. Raises OSError
    when the file cannot be opened, ValueError for an unknown format."""
    fmt = formatter(log_format)
    root = logging.getLogger()
    _drop_own_handlers(root)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(fmt)
    handler._hivemesh = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    if log_format == "json":
        logging.captureWarnings(True)  # warnings.warn would otherwise print non-JSON lines
    if level.upper() != "DEBUG":  # Alembic announces every plug-in it loads at INFO
        logging.getLogger("alembic").setLevel(logging.WARNING)
    audit = logging.getLogger(AUDIT_LOGGER)
    _drop_own_handlers(audit)
    if audit_file is None:
        audit.setLevel(logging.NOTSET)
        audit.propagate = True
        return
    sink = logging.handlers.WatchedFileHandler(audit_file, encoding="utf-8")
    sink.setFormatter(fmt)
    sink._hivemesh = True  # type: ignore[attr-defined]
    audit.addHandler(sink)
    audit.setLevel(logging.INFO)
    audit.propagate = False
