"""``Accept`` header clauses in the order a server should consider them (RFC 9110 content negotiation)."""

from __future__ import annotations

__all__ = ["accept_clauses"]


def accept_clauses(accept: str) -> list[tuple[str, dict[str, str]]]:
    """``(media type, parameters)`` of every clause with ``q > 0``, by descending ``q`` (ties keep their
    order); media types and parameter names lower-cased, quotes around values removed."""
    clauses: list[tuple[float, int, str, dict[str, str]]] = []
    for i, raw in enumerate(accept.split(",")):
        parts = [p.strip() for p in raw.split(";")]
        media = parts[0].lower()
        if not media:
            continue
        params: dict[str, str] = {}
        for p in parts[1:]:
            k, _, v = p.partition("=")
            params[k.strip().lower()] = v.strip().strip('"')
        try:
            q = float(params.get("q", "1"))
        except ValueError:
            q = 1.0
        if q > 0:
            clauses.append((-q, i, media, params))
    clauses.sort(key=lambda c: (c[0], c[1]))
    return [(media, params) for _, _, media, params in clauses]
