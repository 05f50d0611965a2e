"""The embedded Kubernetes-compatible API server (``from kinformer.server import APIServer``)."""

from __future__ import annotations

from typing import Any

__all__ = ["APIServer"]


def __getattr__(name: str) -> Any:
    if name == "APIServer":
        from .apiserver import APIServer

        return APIServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
