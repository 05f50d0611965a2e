"""Resource quantities (``resource.Quantity``): parsing and the canonical text kube prints and stores.

Canonical form follows apimachinery: binary-SI amounts (``Ki`` ... ``Ei``) stay binary when they are whole
numbers of at least 1024 (``1024Mi`` -> ``1Gi``, ``1.5Gi`` -> ``1536Mi``); everything else is a decimal
mantissa with a power-of-thousand suffix (``0.5`` -> ``500m``, ``2000`` -> ``2k``, ``1500`` -> ``1500``) or,
for amounts written with an exponent, ``e<n>`` (``1e3`` stays ``1e3``). Amounts are kept to the nano unit,
rounded up as kube rounds them.

:class:`Quantity` is an amount with its format for arithmetic (quota usage): a sum keeps the format of its
left operand unless that is zero, then takes the right one's, as apimachinery's ``Quantity.Add`` does.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = ["Quantity", "canonical_quantity", "parse_quantity"]

_NUMBER = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(.*)$")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_EXPONENT = re.compile(r"^[eE]([+-]?\d+)$")
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX = {v: k for k, v in _BINARY.items()}
_MAX_EXPONENT = 60  # bounds the arithmetic a malformed amount can ask for


def parse_quantity(text: str) -> tuple[Fraction, str] | None:
    """(amount, format) of a quantity string, format one of ``DecimalSI``, ``BinarySI``, ``DecimalExponent``;
    ``None`` when the text is not a quantity."""
    match = _NUMBER.match(text.strip())
    if match is None:
        return None
    sign, digits, suffix = match.groups()
    number = Fraction(digits) * (-1 if sign == "-" else 1)
    if suffix in _DECIMAL:
        return number * Fraction(10) ** _DECIMAL[suffix], "DecimalSI"
    if suffix in _BINARY:
        return number * 1024 ** _BINARY[suffix], "BinarySI"
    exp = _EXPONENT.match(suffix)
    if exp is None or abs(int(exp.group(1))) > _MAX_EXPONENT:
        return None
    return number * Fraction(10) ** int(exp.group(1)), "DecimalExponent"


def _decimal_text(nanos: int, fmt: str) -> str:
    """A non-zero amount of nano units as mantissa + suffix, the exponent a multiple of 3 kept as large as
    the mantissa stays whole."""
    exponent = -9
    limit = 18 if fmt == "DecimalSI" else _MAX_EXPONENT  # E is the largest SI suffix
    while nanos % 1000 == 0 and exponent < limit:
        nanos //= 1000
        exponent += 3
    if fmt == "DecimalExponent":
        return f"{nanos}e{exponent}" if exponent else str(nanos)
    return f"{nanos}{_DECIMAL_SUFFIX[exponent]}"


def _parsed(value: Any) -> tuple[Fraction, str] | None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    return parse_quantity(str(value)) if isinstance(value, str) else (Fraction(value), "DecimalSI")


def canonical_quantity(value: Any) -> str | None:
    """The canonical text of a quantity (a string or a JSON number); ``None`` when it is not one."""
    parsed = _parsed(value)
    return None if parsed is None else format_quantity(*parsed)


def format_quantity(amount: Fraction, fmt: str) -> str:
    """The canonical text of ``amount`` in format ``fmt`` (``DecimalSI``, ``BinarySI``, ``DecimalExponent``)."""
    nanos = math.ceil(amount * 10**9)
    if nanos == 0:
        return "0"
    if fmt == "BinarySI" and abs(amount) >= 1024 and amount.denominator == 1:
        whole, exponent = int(amount), 0
        while whole % 1024 == 0 and exponent < 6:
            whole //= 1024
            exponent += 1
        return f"{whole}{_BINARY_SUFFIX.get(exponent, '')}"
    return _decimal_text(nanos, "DecimalSI" if fmt == "BinarySI" else fmt)


@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact amount and the format it prints in; ``str()`` is kube's canonical text."""

    amount: Fraction
    fmt: str = "DecimalSI"

    @classmethod
    def parse(cls, value: Any) -> Quantity:
        """A quantity from its text or a JSON number; ``ValueError`` when it is not one."""
        parsed = _parsed(value)
        if parsed is None:
            raise ValueError(f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?"
                             f"[0-9]*)$', got {value!r}")
        return cls(*parsed)

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.amount + other.amount, other.fmt if self.amount == 0 else self.fmt)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.amount - other.amount, other.fmt if self.amount == 0 else self.fmt)

    def __str__(self) -> str:
        return format_quantity(self.amount, self.fmt)
