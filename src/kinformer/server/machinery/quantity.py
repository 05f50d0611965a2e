"""The server's name for :mod:`kinformer.quantity` (resource quantities live with the bottom modules, so the
simulated cluster's scheduler parses them as the server does)."""

from kinformer.quantity import canonical_quantity, parse_quantity

__all__ = ["canonical_quantity", "parse_quantity"]
