"""Completed indexes of an Indexed Job as ``status.completedIndexes`` writes them: ascending, comma-separated
numbers and ``first-last`` runs (e.g. ``"0,2-4"``).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["format_indexes", "parse_indexes"]


def parse_indexes(text: str | None, completions: int) -> set[int]:
    """The indexes in ``text`` below ``completions``; malformed parts are skipped, as kube does."""
    found: set[int] = set()
    for part in (text or "").split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            continue
        low, high = int(first), int(last) if dash else int(first)
        found.update(range(low, min(high, completions - 1) + 1))
    return found


def format_indexes(indexes: Iterable[int]) -> str:
    """Ascending runs: ``{0, 2, 3, 4}`` -> ``"0,2-4"``."""
    runs: list[list[int]] = []
    for index in sorted(set(indexes)):
        if runs and runs[-1][1] == index - 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
