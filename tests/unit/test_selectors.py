"""Label and field selector parsing and matching (apimachinery labels.Parse / fields.ParseSelector rules)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinformer.errors import SelectorError
from kinformer.selectors import (
    FieldSelector,
    LabelSelector,
    Operator,
    Requirement,
    escape_field_value,
    label_selector_from_dict,
    object_fields,
    parse_field_selector,
    parse_label_selector,
    unescape_field_value,
)

# ---------------------------------------------------------------------------------------------- labels


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("", {"a": "b"}, True),
        ("", None, True),
        ("a=b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a=b", {}, False),
        ("a==b", {"a": "b"}, True),
        ("a!=b", {"a": "c"}, True),
        ("a!=b", {}, True),
        ("a!=b", {"a": "b"}, False),
        ("a in (x,y)", {"a": "y"}, True),
        ("a in (x,y)", {"a": "z"}, False),
        ("a in (x,y)", {}, False),
        ("a notin (x,y)", {"a": "z"}, True),
        ("a notin (x,y)", {}, True),
        ("a notin (x,y)", {"a": "x"}, False),
        ("a", {"a": ""}, True),
        ("a", {"b": "x"}, False),
        ("!a", {"b": "x"}, True),
        ("!a", {"a": "x"}, False),
        ("a>5", {"a": "6"}, True),
        ("a>5", {"a": "5"}, False),
        ("a>5", {"a": "x"}, False),
        ("a>5", {}, False),
        ("a<5", {"a": "-7"}, True),
        ("a<5", {"a": "5"}, False),
        ("a=b,c", {"a": "b", "c": "1"}, True),
        ("a=b,c", {"a": "b"}, False),
        ("a=,b notin ()", {"a": "", "b": "x"}, True),
        ("a=", {"a": "x"}, False),
        ("x in (foo,,baz),y,z notin ()", {"x": "", "y": "1", "z": "q"}, True),
        ("in in (in),notin notin (notin)", {"in": "in", "notin": "x"}, True),
        ("example.com/app = web ,  tier  in ( a , b )", {"example.com/app": "web", "tier": "b"}, True),
    ],
)
def test_label_matching(text: str, labels: dict[str, str] | None, expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


def test_canonical_string_sorts_keys_and_values() -> None:
    sel = parse_label_selector("z notin (q,p), b in (y,x,y), a==1, !c, d, e>3, f<4, g!=h")
    assert str(sel) == "a==1,b in (x,y),!c,d,e>3,f<4,g!=h,z notin (p,q)"
    assert [r.key for r in sel.requirements] == ["a", "b", "c", "d", "e", "f", "g", "z"]
    assert sel.requirements[1] == Requirement("b", Operator.IN, ("x", "y"))
    assert parse_label_selector(str(sel)) == sel


def test_empty_set_values_print_and_reparse() -> None:
    sel = parse_label_selector("a in (,x), b in (), c=")
    assert str(sel) == "a in (,x),b in (),c="
    assert parse_label_selector(str(sel)) == sel


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("(", "found '(', expected: !, identifier, or 'end of string'"),
        ("!(", "unable to parse requirement: found '(', expected: identifier"),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a in x", "unable to parse requirement: found 'x' expected: '('"),
        ("a in (x", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in (x y)", "unable to parse requirement: found 'y', expected: ',' or ')'"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("a=b,", "found '', expected: identifier after ','"),
        ("a=b,,c", "found ',', expected: identifier after ','"),
        ("a==(", "unable to parse requirement: found '(', expected: identifier"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a>x", "for 'Gt', 'Lt' operators, the value must be an integer"),
        ("a>99999999999999999999", "for 'Gt', 'Lt' operators, the value must be an integer"),
        ("a=b_", "a valid label must be an empty string or consist of alphanumeric characters"),
        ("a=" + "v" * 64, "must be no more than 63 characters"),
        ("-a=b", "name part must consist of alphanumeric characters"),
        ("k" * 64, "name part must be no more than 63 characters"),
        ("Example.com/a=b", "prefix part a lowercase RFC 1123 subdomain"),
        ("/a=b", "prefix part must be non-empty"),
        ("a/=b", "name part must be non-empty"),
        ("a/b/c=d", "a qualified name must consist of"),
    ],
)
def test_label_parse_errors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_label_selector(text)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_error_reports_position_of_offending_token() -> None:
    with pytest.raises(SelectorError) as info:
        parse_label_selector("app=web tier=x")
    assert info.value.position == len("app=web ")
    with pytest.raises(SelectorError) as info:
        parse_label_selector("app=web,!(")
    assert info.value.position == len("app=web,!")


def test_key_prefix_limits() -> None:
    prefix = ".".join(["a" * 63] * 4)[:253]
    assert parse_label_selector(f"{prefix}/n=v").matches({f"{prefix}/n": "v"})
    with pytest.raises(SelectorError, match="no more than 253 characters"):
        parse_label_selector(f"{prefix}x/n=v")
    assert parse_label_selector("n" * 63).matches({"n" * 63: ""})


def test_parse_is_cached_and_selectors_are_hashable() -> None:
    assert parse_label_selector("a=b,c") is parse_label_selector("a=b,c")
    assert {parse_label_selector("c,a=b"), parse_label_selector("a=b,c")} == {parse_label_selector("a=b,c")}


def test_from_match_labels_and_empty() -> None:
    sel = LabelSelector.from_match_labels({"b": "2", "a": "1"})
    assert str(sel) == "a=1,b=2"
    assert sel.matches({"a": "1", "b": "2", "c": "3"})
    assert not sel.matches({"a": "1"})
    assert LabelSelector.from_match_labels({}).empty()
    with pytest.raises(SelectorError):
        LabelSelector.from_match_labels({"a": "not valid"})


def test_label_selector_from_dict() -> None:
    sel = label_selector_from_dict({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["fe", "be"]},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "owner", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist"},
        ],
    })
    assert str(sel) == "app=web,env notin (prod),!legacy,owner,tier in (be,fe)"
    assert sel.matches({"app": "web", "tier": "fe", "owner": "me"})
    assert not sel.matches({"app": "web", "tier": "fe", "owner": "me", "legacy": "1"})
    assert not sel.matches({"app": "web", "tier": "fe", "owner": "me", "env": "prod"})
    assert label_selector_from_dict({}).matches({"x": "y"})
    assert not label_selector_from_dict(None).matches({})
    with pytest.raises(SelectorError, match='"Gt" is not a valid label selector operator'):
        label_selector_from_dict({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})
    with pytest.raises(SelectorError, match="values set can't be empty"):
        label_selector_from_dict({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
    with pytest.raises(SelectorError, match="values set must be empty"):
        label_selector_from_dict({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})


def test_requires_exact_match() -> None:
    sel = parse_label_selector("a=1,b in (2),c in (3,4),d!=5")
    assert sel.requires_exact_match("a") == "1"
    assert sel.requires_exact_match("b") == "2"
    assert sel.requires_exact_match("c") is None
    assert sel.requires_exact_match("d") is None
    assert sel.requires_exact_match("zz") is None


# ------------------------------------------------------------------------------ hypothesis: labels

KEYS = ["a", "b", "app", "example.com/tier", "x.y_z-1"]
VALUES = ["", "x", "y", "web", "0", "7", "42", "-3"]
VALID_VALUES = [v for v in VALUES if v != "-3"]


@st.composite
def requirements(draw: st.DrawFn) -> Requirement:
    key = draw(st.sampled_from(KEYS))
    op = draw(st.sampled_from(list(Operator)))
    if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
        vals: list[str] = []
    elif op in (Operator.IN, Operator.NOT_IN):
        vals = draw(st.lists(st.sampled_from(VALID_VALUES), min_size=1, max_size=3))
    elif op in (Operator.GREATER_THAN, Operator.LESS_THAN):
        vals = [draw(st.sampled_from(["0", "7", "42"]))]
    else:
        vals = [draw(st.sampled_from(VALID_VALUES))]
    return Requirement.create(key, op, vals)


def reference_match(req: Requirement, labels: dict[str, str]) -> bool:
    """A deliberately naive restatement of apimachinery's Requirement.Matches."""
    present = req.key in labels
    value = labels.get(req.key)
    op = req.operator
    if op in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN):
        return present and value in req.values
    if op in (Operator.NOT_EQUALS, Operator.NOT_IN):
        return not present or value not in req.values
    if op is Operator.EXISTS:
        return present
    if op is Operator.DOES_NOT_EXIST:
        return not present
    try:
        number = int(value) if present else None
    except ValueError:
        return False
    if number is None:
        return False
    bound = int(req.values[0])
    return number > bound if op is Operator.GREATER_THAN else number < bound


labels_strategy = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=5)


@settings(max_examples=300, deadline=None)
@given(st.lists(requirements(), max_size=5))
def test_string_form_reparses_to_equal_selector(reqs: list[Requirement]) -> None:
    sel = LabelSelector(reqs)
    again = parse_label_selector(str(sel))
    assert again == sel
    assert str(again) == str(sel)


@settings(max_examples=300, deadline=None)
@given(st.lists(requirements(), max_size=5), labels_strategy)
def test_matches_agrees_with_reference(reqs: list[Requirement], labels: dict[str, str]) -> None:
    sel = parse_label_selector(str(LabelSelector(reqs)))
    assert sel.matches(labels) == all(reference_match(r, labels) for r in reqs)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab=!(), \tinotx5<>/.-_", max_size=20))
def test_arbitrary_text_parses_or_raises_selector_error(text: str) -> None:
    try:
        sel = parse_label_selector(text)
    except SelectorError:
        return
    assert parse_label_selector(str(sel)) == sel


# ---------------------------------------------------------------------------------------------- fields


def test_field_selector_basics() -> None:
    sel = parse_field_selector("metadata.namespace!=kube-system,metadata.name=web")
    assert str(sel) == "metadata.name=web,metadata.namespace!=kube-system"
    assert sel.matches({"metadata.name": "web", "metadata.namespace": "default"})
    assert not sel.matches({"metadata.name": "web", "metadata.namespace": "kube-system"})
    assert not sel.matches({"metadata.name": "db", "metadata.namespace": "default"})
    assert [(r.field, r.operator, r.value) for r in sel.requirements] == [
        ("metadata.name", Operator.EQUALS, "web"), ("metadata.namespace", Operator.NOT_EQUALS, "kube-system")]
    assert sel.requires_exact_match("metadata.name") == "web"
    assert sel.requires_exact_match("metadata.namespace") is None


def test_field_selector_double_equals_missing_and_empty() -> None:
    assert parse_field_selector("spec.nodeName==").matches({})
    assert parse_field_selector("spec.nodeName==n1").matches({"spec.nodeName": "n1"})
    assert parse_field_selector("").empty()
    assert parse_field_selector("").matches({"anything": "x"})
    assert parse_field_selector("a=1,,b=2") == parse_field_selector("b=2,a=1")


def test_field_selector_escaping() -> None:
    sel = parse_field_selector(r"metadata.name=a\,b\=c\\d")
    assert sel.matches({"metadata.name": "a,b=c\\d"})
    assert str(sel) == r"metadata.name=a\,b\=c\\d"
    assert parse_field_selector(str(sel)) == sel


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
        ("a=1,b", "can't understand 'b'"),
        (r"a=x\y", r"invalid field selector: invalid escape sequence: \y"),
        ("a=x\\", "invalid field selector: invalid escape sequence: \\"),
        ("a=b=c", "invalid field selector: unescaped character in value: ="),
    ],
)
def test_field_selector_errors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_field_selector(text)
    assert message in str(info.value)


def test_object_fields() -> None:
    assert object_fields({"metadata": {"name": "n", "namespace": "ns"}}) == {
        "metadata.name": "n", "metadata.namespace": "ns"}
    assert object_fields({"metadata": {"name": "node1"}}) == {"metadata.name": "node1", "metadata.namespace": ""}
    assert parse_field_selector("metadata.namespace=").matches(object_fields({"metadata": {"name": "node1"}}))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=12))
def test_field_value_escape_roundtrip(value: str) -> None:
    assert unescape_field_value(escape_field_value(value)) == value
    sel = FieldSelector([]) if not value else parse_field_selector("f=" + escape_field_value(value))
    if value:
        assert sel.matches({"f": value})
        assert parse_field_selector(str(sel)) == sel
