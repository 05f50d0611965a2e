"""Resource quantities in kube's canonical form (``kinformer.server.machinery.quantity``)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from kinformer.quantity import canonical_quantity, parse_quantity


@pytest.mark.parametrize(("value", "text"), [
    ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"), ("0.5Ki", "512"), ("1025", "1025"), ("2048", "2048"),
    ("0.5", "500m"), ("1.5", "1500m"), (".5", "500m"), ("2000", "2k"), ("1500", "1500"), ("1000000000", "1G"),
    ("100m", "100m"), ("1e3", "1e3"), ("1.5e3", "1500"), ("12e6", "12e6"), ("0", "0"), ("0Mi", "0"),
    ("-1Gi", "-1Gi"), ("+2", "2"), (10, "10"), (0.25, "250m"), ("3.0000000001", "3000000001n"),
])
def test_canonical_quantity(value: Any, text: str) -> None:
    assert canonical_quantity(value) == text


@pytest.mark.parametrize("value", ["abc", "1Xi", "1e999", "", None, True, {"a": 1}])
def test_not_a_quantity(value: Any) -> None:
    assert canonical_quantity(value) is None


def test_parse_quantity_reports_the_format() -> None:
    assert parse_quantity("1Ki") == (Fraction(1024), "BinarySI")
    assert parse_quantity("5m") == (Fraction(1, 200), "DecimalSI")
    assert parse_quantity("2E3") == (Fraction(2000), "DecimalExponent")
