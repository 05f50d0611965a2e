"""Log records that say which controller and which reconcile wrote them (controller-runtime's ``log.FromContext``).

The controller machinery sets a context (a :mod:`contextvars` variable, so it follows the reconcile into the
tasks it starts and into the worker thread of a plain reconciler) and the loggers made here copy it onto every
record they emit as plain :class:`logging.LogRecord` attributes, so any logging configuration sees them —
``%(controller)s`` in a format string, a JSON formatter, structlog's ``ExtraAdder``:

* ``controller``: the controller's name (set while the controller runs);
* ``namespace``, ``object_name``, ``reconcile_id`` (a fresh UUID per reconcile, also on its trace span): set
  during a reconcile.
  ``LogRecord.name`` already holds the logger's name, so the object's name is ``object_name``.

Outside any context the records carry none of them. An attribute given explicitly (``extra=``) wins.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

__all__ = ["FIELDS", "context_logger", "current", "log_context", "reconcile_context", "reconcile_logger"]

#: The record attributes a reconcile's log lines carry.
FIELDS = ("controller", "namespace", "object_name", "reconcile_id")

_CONTEXT: ContextVar[dict[str, str]] = ContextVar("kinformer_log_context", default={})  # noqa: B039 (never mutated)


class _ContextFilter(logging.Filter):
    """Copies the current context onto each record (never filters anything out)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _CONTEXT.get().items():
            if key not in record.__dict__:
                setattr(record, key, value)
        return True


_FILTER = _ContextFilter()


def context_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)``, its records carrying the current context (the filter is added once)."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


def reconcile_logger(name: str = "kinformer.reconcile") -> logging.Logger:
    """A standard :class:`logging.Logger` whose records, when emitted inside a reconcile, carry ``controller``,
    ``namespace``, ``object_name`` and ``reconcile_id``. It reads the context when a record is emitted, so a
    logger made once (at import) serves every reconcile."""
    return context_logger(name)


def current() -> dict[str, str]:
    """The context in effect (a copy; empty outside any controller)."""
    return dict(_CONTEXT.get())


@contextlib.contextmanager
def log_context(**values: Any) -> Iterator[None]:
    """Add ``values`` to the context for the body of the ``with`` (and what it starts)."""
    token = _CONTEXT.set({**_CONTEXT.get(), **{k: str(v) for k, v in values.items()}})
    try:
        yield
    finally:
        _CONTEXT.reset(token)


def reconcile_context(controller: str, namespace: str, name: str,
                      reconcile_id: str) -> contextlib.AbstractContextManager[None]:
    """The context of one reconcile of ``namespace/name`` by ``controller``."""
    return log_context(controller=controller, namespace=namespace, object_name=name, reconcile_id=reconcile_id)
