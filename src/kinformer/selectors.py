"""Label and field selectors, parsed and matched the way k8s.io/apimachinery does.

Label selectors (``labels.Parse``) accept comma-separated requirements, all of which must hold:

    key=value   key==value   key!=value   key in (a,b)   key notin (a,b)   key   !key   key>5   key<5

Keys are qualified names (``[DNS-1123-subdomain/]name``, name at most 63 characters, prefix at most 253);
values are empty or at most 63 alphanumerics with ``-``, ``_`` or ``.`` inside. ``>``/``<`` compare
base-10 integers (a label value that is not an integer never matches). The empty selector matches
everything. Requirements are kept sorted by key (stable), values sorted and de-duplicated, so two
selectors that mean the same thing compare equal and print the same.

Field selectors (``fields.ParseSelector``) are ``path=value``, ``path==value`` and ``path!=value`` terms
joined by commas; ``\\``, ``,`` and ``=`` in values are backslash-escaped. A missing field reads as "".

Both parsers are memoised (``functools.lru_cache``): selector objects are immutable and shared, so the
same string from many requests costs one parse. A string that does not parse raises
:class:`kinformer.errors.SelectorError` with apimachinery's message (``position`` attribute: the offset
of the offending token when known).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from kinformer.errors import SelectorError
from kinformer.names import is_qualified_name, is_valid_label_value

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Operator",
    "Requirement",
    "escape_field_value",
    "field_value",
    "label_selector_from_dict",
    "object_fields",
    "parse_field_selector",
    "parse_label_selector",
    "unescape_field_value",
    "validate_label_key",
    "validate_label_value",
]


class Operator(enum.StrEnum):
    """Selector operators, spelled as ``k8s.io/apimachinery/pkg/selection`` spells them."""

    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"

# --------------------------------------------------------------------------------------------------
# validation (the name rules live in kinformer.names)
# --------------------------------------------------------------------------------------------------

_INT64_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


#: The problems with a label key (a qualified name) / a label value; empty when valid.
validate_label_key = is_qualified_name
validate_label_value = is_valid_label_value


def _parse_int64(text: str) -> int | None:
    if not _INT64_RE.fullmatch(text):
        return None
    n = int(text)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


def _invalid(path: str, value: str, errs: list[str]) -> str:
    return f'{path}: Invalid value: "{value}": {"; ".join(errs)}'


def _aggregate(errs: list[str]) -> str:
    unique = list(dict.fromkeys(errs))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


# --------------------------------------------------------------------------------------------------
# label requirements and selectors
# --------------------------------------------------------------------------------------------------


class Requirement(NamedTuple):
    """One label requirement: ``key``, ``operator`` and its ``values`` (sorted, unique)."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    @classmethod
    def create(cls, key: str, operator: Operator | str, values: Iterable[str] = (), *,
               path: str = "") -> Requirement:
        """Validate and build a requirement (``labels.NewRequirement``); raise SelectorError when invalid."""
        try:
            op = Operator(operator)
        except ValueError:
            raise SelectorError(f'{path + "." if path else ""}operator: Unsupported value: "{operator}"') from None
        vals = tuple(values)
        errs = _requirement_errors(key, op, vals, path)
        if errs:
            raise SelectorError(_aggregate(errs))
        return cls(key, op, tuple(sorted(set(vals))))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """True if ``labels`` satisfy this requirement (missing labels as apimachinery treats them)."""
        return _compile_requirement(self)(labels or _EMPTY)

    def __str__(self) -> str:
        op, key, vals = Operator(self.operator), self.key, self.values
        if op is Operator.EXISTS:
            return key
        if op is Operator.DOES_NOT_EXIST:
            return "!" + key
        if op is Operator.IN or op is Operator.NOT_IN:
            return f"{key} {op.value} ({','.join(vals)})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return key + symbol + (vals[0] if vals else "")


def _requirement_errors(key: str, op: Operator, vals: tuple[str, ...], path: str) -> list[str]:
    prefix = path + "." if path else ""
    errs = []
    key_errs = validate_label_key(key)
    if key_errs:
        errs.append(_invalid(prefix + "key", key, key_errs))
    if op in (Operator.IN, Operator.NOT_IN) and not vals:
        errs.append(f"{prefix}values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty")
    elif op in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS) and len(vals) != 1:
        errs.append(f"{prefix}values: Invalid value: {list(vals)}: exact-match compatibility requires one single value")
    elif op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and vals:
        errs.append(f"{prefix}values: Invalid value: {list(vals)}: values set must be empty for exists and "
                    "does not exist")
    elif op in (Operator.GREATER_THAN, Operator.LESS_THAN):
        if len(vals) != 1:
            errs.append(f"{prefix}values: Invalid value: {list(vals)}: for 'Gt', 'Lt' operators, exactly one value "
                        "is required")
        for i, v in enumerate(vals):
            if _parse_int64(v) is None:
                errs.append(_invalid(f"{prefix}values[{i}]", v,
                                     ["for 'Gt', 'Lt' operators, the value must be an integer"]))
    for i, v in enumerate(vals):
        value_errs = validate_label_value(v)
        if value_errs:
            errs.append(_invalid(f"{prefix}values[{i}][{key}]", v, value_errs))
    return errs


_EMPTY: Mapping[str, str] = {}
_Matcher = Callable[[Mapping[str, str]], bool]


def _compile_requirement(req: Requirement) -> _Matcher:
    """A closure evaluating ``req`` against a labels mapping (never None)."""
    key, op, vals = req.key, Operator(req.operator), req.values
    if op is Operator.EXISTS:
        return lambda labels: key in labels
    if op is Operator.DOES_NOT_EXIST:
        return lambda labels: key not in labels
    if op in (Operator.EQUALS, Operator.DOUBLE_EQUALS) or (op is Operator.IN and len(vals) == 1):
        value = vals[0]
        return lambda labels: labels.get(key) == value
    if op is Operator.NOT_EQUALS or (op is Operator.NOT_IN and len(vals) == 1):
        value = vals[0]
        return lambda labels: key not in labels or labels[key] != value
    if op is Operator.IN:
        value_set = frozenset(vals)
        return lambda labels: key in labels and labels[key] in value_set
    if op is Operator.NOT_IN:
        value_set = frozenset(vals)
        return lambda labels: key not in labels or labels[key] not in value_set
    bound = _parse_int64(vals[0]) if len(vals) == 1 else None
    greater = op is Operator.GREATER_THAN

    def compare(labels: Mapping[str, str]) -> bool:
        raw = labels.get(key)
        if raw is None or bound is None:
            return False
        n = _parse_int64(raw)
        return n is not None and (n > bound if greater else n < bound)

    return compare


class LabelSelector:
    """An immutable, hashable AND of label :class:`Requirement` s.

    Invariant: requirements are sorted by key (stable for equal keys), each with sorted unique values;
    ``str()`` gives apimachinery's canonical form, which parses back to an equal selector.
    """

    __slots__ = ("_matchers", "_nothing", "_reqs")

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        self._reqs: tuple[Requirement, ...] = tuple(sorted(requirements, key=lambda r: r.key))
        self._nothing = nothing
        self._matchers: tuple[_Matcher, ...] = tuple(_compile_requirement(r) for r in self._reqs)

    @classmethod
    def everything(cls) -> LabelSelector:
        """The selector that matches every label set."""
        return _EVERYTHING

    @classmethod
    def nothing(cls) -> LabelSelector:
        """The selector that matches no label set (what a null metav1.LabelSelector means)."""
        return _NOTHING

    @classmethod
    def from_match_labels(cls, match_labels: Mapping[str, str] | None) -> LabelSelector:
        """Equality requirements for every pair of ``match_labels`` (validated); empty -> everything."""
        if not match_labels:
            return _EVERYTHING
        return cls(Requirement.create(k, Operator.EQUALS, [v]) for k, v in match_labels.items())

    @property
    def requirements(self) -> list[Requirement]:
        """The requirements, sorted by key."""
        return list(self._reqs)

    def empty(self) -> bool:
        """True if the selector does not restrict anything (matches every label set)."""
        return not self._reqs and not self._nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """True if every requirement holds for ``labels`` (None reads as no labels)."""
        if self._nothing:
            return False
        if labels is None:
            labels = _EMPTY
        for match in self._matchers:
            if not match(labels):
                return False
        return True

    def requires_exact_match(self, key: str) -> str | None:
        """The single value ``key`` must have (``=``, ``==`` or a one-value ``in``), else None."""
        for r in self._reqs:
            if r.key == key:
                if r.operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN) and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def add(self, *requirements: Requirement) -> LabelSelector:
        """A new selector with ``requirements`` added."""
        return LabelSelector((*self._reqs, *requirements), nothing=self._nothing)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self._reqs)

    def __repr__(self) -> str:
        return "LabelSelector(<nothing>)" if self._nothing else f"LabelSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return self._reqs == other._reqs and self._nothing == other._nothing

    def __hash__(self) -> int:
        return hash((self._reqs, self._nothing))


_EVERYTHING = LabelSelector()
_NOTHING = LabelSelector(nothing=True)

# --------------------------------------------------------------------------------------------------
# label selector lexer and parser
# --------------------------------------------------------------------------------------------------

_END, _IDENT, _OPEN, _CLOSE, _COMMA, _NOT, _EQ, _EQEQ, _NEQ, _GT, _LT, _IN, _NOTIN = range(13)
_SYMBOLS = {")": _CLOSE, ",": _COMMA, "!": _NOT, "==": _EQEQ, "=": _EQ, ">": _GT, "<": _LT, "!=": _NEQ,
            "(": _OPEN}
_KEYWORDS = {"in": _IN, "notin": _NOTIN}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_OPERATOR_OF = {_IN: Operator.IN, _NOTIN: Operator.NOT_IN, _EQ: Operator.EQUALS, _EQEQ: Operator.DOUBLE_EQUALS,
                _NEQ: Operator.NOT_EQUALS, _GT: Operator.GREATER_THAN, _LT: Operator.LESS_THAN}


class _Token(NamedTuple):
    kind: int
    text: str
    pos: int


def _lex(text: str) -> list[_Token]:
    """Tokens of ``text``; ``in``/``notin`` come out as keywords (the parser demotes them in value context)."""
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            tokens.append(_Token(_END, "", n))
            return tokens
        start = i
        if text[i] in _SPECIAL:
            # longest run of special characters that is still a known symbol
            j = i + 1
            while j < n and text[j] in _SPECIAL and text[i:j + 1] in _SYMBOLS:
                j += 1
            lit = text[i:j]
            tokens.append(_Token(_SYMBOLS[lit], lit, start))
            i = j
            continue
        while i < n and text[i] not in _SPECIAL and text[i] not in _WHITESPACE:
            i += 1
        lit = text[start:i]
        tokens.append(_Token(_KEYWORDS.get(lit, _IDENT), lit, start))


class _LabelParser:
    """Recursive-descent parser following apimachinery's grammar and error messages."""

    __slots__ = ("pos", "tokens")

    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def _peek(self) -> tuple[int, str]:
        tok = self.tokens[self.pos]
        kind = _IDENT if tok.kind in (_IN, _NOTIN) else tok.kind
        return kind, tok.text

    def _next(self, value_context: bool = True) -> tuple[int, str]:
        tok = self.tokens[self.pos]
        self.pos += 1
        kind = tok.kind
        if value_context and kind in (_IN, _NOTIN):
            kind = _IDENT
        return kind, tok.text

    def _error(self, message: str, at: int | None = None) -> SelectorError:
        """A SelectorError whose ``position`` is the offset of token ``at`` (default: the last consumed)."""
        index = self.pos - 1 if at is None else at
        err = SelectorError(message)
        err.position = self.tokens[max(0, min(index, len(self.tokens) - 1))].pos
        return err

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            kind, lit = self._peek()
            if kind == _END:
                return reqs
            if kind not in (_IDENT, _NOT):
                raise self._error(f"found '{lit}', expected: !, identifier, or 'end of string'", at=self.pos)
            try:
                reqs.append(self._requirement())
            except SelectorError as e:
                err = SelectorError(f"unable to parse requirement: {e}")
                err.position = getattr(e, "position", 0)
                raise err from None
            kind, lit = self._next()
            if kind == _END:
                return reqs
            if kind != _COMMA:
                raise self._error(f"found '{lit}', expected: ',' or 'end of string'")
            kind, lit = self._peek()
            if kind not in (_IDENT, _NOT):
                raise self._error(f"found '{lit}', expected: identifier after ','", at=self.pos)

    def _requirement(self) -> Requirement:
        kind, key = self._next()
        negated = kind == _NOT
        if negated:
            kind, key = self._next()
        if kind != _IDENT:
            raise self._error(f"found '{key}', expected: identifier")
        key_errs = validate_label_key(key)
        if key_errs:
            raise self._error(_invalid("<nil>", key, key_errs))
        follow, _ = self._peek()
        if negated or follow in (_END, _COMMA):
            op = Operator.DOES_NOT_EXIST if negated else Operator.EXISTS
            return self._build(key, op, ())
        kind, lit = self._next(value_context=False)
        binary = _OPERATOR_OF.get(kind)
        if binary is None:
            raise self._error(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        values = self._set_values() if binary in (Operator.IN, Operator.NOT_IN) else self._exact_value()
        return self._build(key, binary, values)

    def _build(self, key: str, op: Operator, values: Iterable[str]) -> Requirement:
        vals = tuple(sorted(set(values)))
        errs = _requirement_errors(key, op, vals, "")
        if errs:
            raise self._error(_aggregate(errs))
        return Requirement(key, op, vals)

    def _set_values(self) -> set[str]:
        kind, lit = self._next()
        if kind != _OPEN:
            raise self._error(f"found '{lit}' expected: '('")
        kind, lit = self._peek()
        if kind == _CLOSE:
            self._next()
            return {""}
        if kind not in (_IDENT, _COMMA):
            raise self._error(f"found '{lit}', expected: ',', ')' or identifier", at=self.pos)
        values = self._identifier_list()
        kind, _ = self._next()
        if kind != _CLOSE:
            raise self._error(f"found '{lit}', expected: ')'")
        return values

    def _identifier_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            kind, lit = self._next()
            if kind == _IDENT:
                values.add(lit)
                follow, follow_lit = self._peek()
                if follow == _COMMA:
                    continue
                if follow == _CLOSE:
                    return values
                raise self._error(f"found '{follow_lit}', expected: ',' or ')'", at=self.pos)
            if kind != _COMMA:
                raise self._error(f"found '{lit}', expected: ',', or identifier")
            # an empty value before or after a comma ("(,a)", "(a,)", "(a,,b)")
            if not values:
                values.add("")
            follow, _ = self._peek()
            if follow == _CLOSE:
                values.add("")
                return values
            if follow == _COMMA:
                self._next()
                values.add("")

    def _exact_value(self) -> tuple[str, ...]:
        kind, _ = self._peek()
        if kind in (_END, _COMMA):
            return ("",)
        kind, lit = self._next()
        if kind == _IDENT:
            return (lit,)
        raise self._error(f"found '{lit}', expected: identifier")


@lru_cache(maxsize=4096)
def parse_label_selector(text: str) -> LabelSelector:
    """Parse a label selector string (``labels.Parse``); raise SelectorError on bad input."""
    if not text or text.isspace():
        return _EVERYTHING
    return LabelSelector(_LabelParser(text).parse())


_EXPRESSION_OPERATORS = {"In": Operator.IN, "NotIn": Operator.NOT_IN, "Exists": Operator.EXISTS,
                         "DoesNotExist": Operator.DOES_NOT_EXIST}


def label_selector_from_dict(selector: Mapping[str, Any] | None) -> LabelSelector:
    """Convert a metav1.LabelSelector (``{matchLabels, matchExpressions}``) into a :class:`LabelSelector`.

    None means "select nothing"; an empty selector selects everything (``LabelSelectorAsSelector``).
    """
    if selector is None:
        return _NOTHING
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not match_labels and not expressions:
        return _EVERYTHING
    reqs = [Requirement.create(k, Operator.EQUALS, [v]) for k, v in match_labels.items()]
    for expr in expressions:
        raw_op = expr.get("operator", "")
        op = _EXPRESSION_OPERATORS.get(raw_op)
        if op is None:
            raise SelectorError(f'"{raw_op}" is not a valid label selector operator')
        reqs.append(Requirement.create(expr.get("key", ""), op, expr.get("values") or ()))
    return LabelSelector(reqs)


# --------------------------------------------------------------------------------------------------
# field selectors
# --------------------------------------------------------------------------------------------------


class FieldRequirement(NamedTuple):
    """One field term: ``field`` compared with ``value`` by ``operator`` (=, == or !=)."""

    field: str
    operator: Operator
    value: str

    def __str__(self) -> str:
        op = "!=" if self.operator is Operator.NOT_EQUALS else "="
        return self.field + op + escape_field_value(self.value)


def escape_field_value(value: str) -> str:
    """Escape ``\\``, ``,`` and ``=`` so ``value`` can sit in a field selector."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_field_value(text: str) -> str:
    """Undo :func:`escape_field_value`; unescaped ``,``/``=`` or unknown escapes raise SelectorError."""
    if "\\" not in text and "," not in text and "=" not in text:
        return text
    out: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {ch}")
        else:
            out.append(ch)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


class FieldSelector:
    """An immutable AND of field terms; terms are kept sorted by their source text, as apimachinery does."""

    __slots__ = ("_reqs",)

    def __init__(self, requirements: Iterable[FieldRequirement] = ()) -> None:
        self._reqs: tuple[FieldRequirement, ...] = tuple(requirements)

    @property
    def requirements(self) -> list[FieldRequirement]:
        return list(self._reqs)

    def empty(self) -> bool:
        return not self._reqs

    def matches(self, fields: Mapping[str, str]) -> bool:
        """True if every term holds; a field missing from ``fields`` reads as ""."""
        get = fields.get
        for field, op, value in self._reqs:
            if (get(field, "") == value) is (op is Operator.NOT_EQUALS):
                return False
        return True

    def requires_exact_match(self, field: str) -> str | None:
        """The value ``field`` must equal, if one of the terms says so."""
        for r in self._reqs:
            if r.field == field and r.operator is not Operator.NOT_EQUALS:
                return r.value
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self._reqs)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self._reqs == other._reqs

    def __hash__(self) -> int:
        return hash(self._reqs)


def _split_field_terms(text: str) -> list[str]:
    terms, start, escaped = [], 0, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_field_term(term: str) -> tuple[str, Operator, str] | None:
    for i in range(len(term)):
        rest = term[i:]
        if rest.startswith("!="):
            return term[:i], Operator.NOT_EQUALS, rest[2:]
        if rest.startswith("=="):
            return term[:i], Operator.DOUBLE_EQUALS, rest[2:]
        if rest.startswith("="):
            return term[:i], Operator.EQUALS, rest[1:]
    return None


@lru_cache(maxsize=4096)
def parse_field_selector(text: str) -> FieldSelector:
    """Parse a field selector (``fields.ParseSelector``); raise SelectorError on bad input."""
    if not text:
        return FieldSelector()
    reqs = []
    for term in sorted(_split_field_terms(text)):
        if not term:
            continue
        split = _split_field_term(term)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        field, op, raw = split
        reqs.append(FieldRequirement(field, op, unescape_field_value(raw)))
    return FieldSelector(reqs)


def object_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    """The fields every object supports in field selectors: ``metadata.name`` and ``metadata.namespace``."""
    meta = obj.get("metadata") or {}
    return {"metadata.name": meta.get("name") or "", "metadata.namespace": meta.get("namespace") or ""}


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string form of the value at a dotted ``path`` ("" when absent), as field selectors compare it."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
        if cur is None:
            return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)
