"""What the reflector accepts as a resourceVersion from a server.

resourceVersions are opaque to clients, but every Kubernetes API server issues them as the decimal text of
an unsigned 64-bit revision (etcd's). The reflector stores the last one it saw and sends it back on every
list and watch, so one garbage value (``-5``, ``abc``, 23 digits) from a broken or hostile server would be
sent forever. A value is *sane* when it is 1 to 20 ASCII digits, without a leading zero (except ``"0"``),
and at most 2**64 - 1; the reflector never stores any other.
"""

from __future__ import annotations

__all__ = ["MAX_RESOURCE_VERSION", "is_sane_resource_version", "resource_version_order"]

MAX_RESOURCE_VERSION = 2**64 - 1
_MAX_DIGITS = len(str(MAX_RESOURCE_VERSION))


def is_sane_resource_version(rv: object) -> bool:
    """True when ``rv`` is a str a Kubernetes API server could have issued (see the module docstring)."""
    if not isinstance(rv, str) or not 0 < len(rv) <= _MAX_DIGITS or not rv.isascii() or not rv.isdigit():
        return False
    if rv[0] == "0":
        return rv == "0"
    return len(rv) < _MAX_DIGITS or int(rv) <= MAX_RESOURCE_VERSION


def resource_version_order(rv: str) -> int:
    """The revision a sane resourceVersion stands for (to notice one going backwards; never sent anywhere)."""
    return int(rv)
