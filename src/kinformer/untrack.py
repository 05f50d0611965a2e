"""Leaving objects out of CPython's cyclic garbage collector.

:func:`gc_untrack` is CPython's ``PyObject_GC_UnTrack``: the collector no longer walks the object at its
collections. Only for an object that can never be part of a reference cycle (it refers to nothing that refers
back to it, such as bytes, strings and decoded JSON): reference counting still frees it, and untracking is
idempotent. A no-op on an interpreter without that API.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

__all__ = ["gc_untrack"]


def _gc_untrack_function() -> Callable[[object], None]:
    try:
        untrack = ctypes.pythonapi.PyObject_GC_UnTrack
    except (AttributeError, ValueError):
        return lambda obj: None
    untrack.argtypes = [ctypes.py_object]
    untrack.restype = None
    return untrack


gc_untrack: Callable[[object], None] = _gc_untrack_function()
