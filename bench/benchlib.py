"""What every bench shares: the realistic pod fixture and the ``--quick`` flag.

``--quick`` runs a bench at small sizes so the test suite can check that it still runs (its figures mean
nothing); explicit options still win over the quick defaults.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: A realistic ~7.7 KB pod as a kube-apiserver returns it (managedFields included).
FIXTURE = Path(__file__).resolve().parent / "pod-realistic.json"


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None,
               **quick: Any) -> argparse.Namespace:
    """Parse ``argv`` with a ``--quick`` flag that switches the defaults to ``quick``'s values."""
    parser.add_argument("--quick", action="store_true",
                        help="small sizes: a smoke run that checks the bench still runs (figures mean nothing)")
    known, _ = parser.parse_known_args(argv)
    if known.quick:
        parser.set_defaults(**quick)
    return parser.parse_args(argv)
