"""Request-body decoding limits: YAML aliases measured before expansion, nesting depth, accepted media types."""

from __future__ import annotations

import pytest

from kinformer.server.endpoints.bodies import MAX_DEPTH, MAX_EXPANDED_BYTES, load_json, parse_document
from kinformer.server.machinery.status import StatusError


def _alias_bomb(levels: int, fanout: int = 9) -> bytes:
    """``a0: &a0 [x, ...]`` then each level a list of ``fanout`` aliases of the previous one."""
    lines = [f"a0: &a0 [{', '.join(['x'] * fanout)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fanout)}]" for i in range(1, levels)]
    return "\n".join(lines).encode()


def _refused(body: bytes, ctype: str = "application/yaml") -> StatusError:
    with pytest.raises(StatusError) as info:
        parse_document(body, ctype)
    return info.value


def test_yaml_alias_bomb_is_refused_before_expanding() -> None:
    for levels in (6, 8, 12):  # 531 441 leaves (the smallest refused by kube's ratio rule) .. 282 billion
        err = _refused(_alias_bomb(levels))
        assert (err.code, err.reason) == (400, "BadRequest")
        assert err.message == "error converting YAML to JSON: yaml: document contains excessive aliasing"


def test_yaml_alias_expanding_past_the_size_limit_is_refused() -> None:
    big = "x" * 100_000
    body = f"s: &s {big}\nl: [{', '.join(['*s'] * (MAX_EXPANDED_BYTES // len(big) + 1))}]".encode()
    assert "expands to more than" in _refused(body).message


def test_yaml_cyclic_alias_is_refused() -> None:
    assert "cyclic alias" in _refused(b"a: &a [1, *a]").message
    assert "cyclic alias" in _refused(b"&m {k: *m}").message


def test_yaml_with_a_few_aliases_is_expanded() -> None:
    body = b"base: &b {app: web, tier: fe}\nlabels: *b\nlist: [*b, *b]\nname: &n cm\nalso: *n\n"
    assert parse_document(body, "application/yaml") == {
        "base": {"app": "web", "tier": "fe"}, "labels": {"app": "web", "tier": "fe"},
        "list": [{"app": "web", "tier": "fe"}, {"app": "web", "tier": "fe"}], "name": "cm", "also": "cm"}
    # the expansion shares nothing: each alias became its own copy
    doc = parse_document(body, "application/yaml")
    assert doc["labels"] is not doc["base"] and doc["list"][0] is not doc["list"][1]


def test_nesting_deeper_than_the_limit_is_refused_in_every_format() -> None:
    ok = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert parse_document(ok, "application/json") is not None
    deep = MAX_DEPTH + 1
    for body, ctype in ((b"[" * deep + b"]" * deep, "application/json"),
                        (b'{"kind":"ConfigMap","x":' + b"[" * 600 + b"]" * 600 + b"}", "application/json"),
                        (b"[" * deep + b"]" * deep, "application/yaml"),
                        (b"[" * deep + b"]" * deep, "")):
        err = _refused(body, ctype)
        assert err.code == 400 and f"max depth of {MAX_DEPTH}" in err.message, ctype
    # an alias placed deeper than where it was defined counts at its new depth
    half = MAX_DEPTH // 2 + 1
    body = b"a: &a " + b"[" * half + b"]" * half + b"\nb: " + b"[" * half + b"*a" + b"]" * half
    assert f"max depth of {MAX_DEPTH}" in _refused(body).message


def test_load_json_depth_error_is_a_json_decode_error() -> None:
    import orjson

    with pytest.raises(orjson.JSONDecodeError, match="max depth"):
        load_json(b"[" * 300 + b"]" * 300)
    brackets_in_a_string = b'{"a": "' + b"[" * 300 + b'"}'
    assert load_json(brackets_in_a_string) == {"a": "[" * 300}


def test_a_builtin_body_walked_by_its_schema_is_held_to_the_same_depth() -> None:
    import orjson

    from kinformer.server.registry.resources import Registry
    from kinformer.server.registry.validation import decoded_fine

    info = Registry().get("", "v1", "configmaps")
    data = {f"k{i}": "v" * 40 for i in range(60)}  # over 2 KiB: the bracket count does not settle it

    def body(field: str, levels: int) -> bytes:
        value: object = []
        for _ in range(levels - 1):
            value = [value]
        meta = {"name": "cm", field: value}
        return orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})

    def check(doc: object) -> bool:
        return decoded_fine(info, doc)

    # managedFields is free-form (measured), "unknown" fails the walk (then the whole document is measured)
    for field in ("managedFields", "unknown"):
        assert load_json(body(field, MAX_DEPTH - 2), check)["metadata"]["name"] == "cm"
        with pytest.raises(StatusError) as err:
            parse_document(body(field, MAX_DEPTH - 1), "application/json", check)
        assert err.value.code == 400
        assert err.value.message.startswith(f"couldn't get version/kind; json parse error: exceeded max depth of "
                                            f"{MAX_DEPTH}")
        with pytest.raises(orjson.JSONDecodeError, match="max depth"):
            load_json(body(field, MAX_DEPTH - 1), check)


def _nested(levels: int, container: str) -> object:
    value: object = "leaf"
    for _ in range(levels):
        value = [value] if container == "list" else {"k": value}
    return value


@pytest.mark.parametrize("container", ["list", "dict"])
@pytest.mark.parametrize("limit", [1, 50, MAX_DEPTH, 253, 254, 300])
def test_too_deep_is_exact_at_the_limit(limit: int, container: str) -> None:
    from kinformer.server.endpoints.bodies import too_deep

    assert not too_deep(_nested(limit, container), limit)
    assert too_deep(_nested(limit + 1, container), limit)
    # data orjson cannot write (an integer beyond 64 bits) is measured all the same
    assert not too_deep([_nested(limit - 1, container), 2**70], limit)
    assert too_deep([_nested(limit, container), 2**70], limit)


@pytest.mark.parametrize("container", ["list", "dict"])
@pytest.mark.parametrize("limit", [1, 50, MAX_DEPTH, 253])
def test_encoded_size_is_the_encodings_within_the_limit_and_none_beyond(limit: int, container: str) -> None:
    import orjson

    from kinformer.server.machinery.nesting import encoded_size

    docs = [_nested(limit, container), []] + ([{"a": [1, 2.5, None, True, "é\n"], "b": {}}] if limit > 1 else [])
    for doc in docs:
        assert encoded_size(doc, limit) == len(orjson.dumps(doc))
    assert encoded_size(_nested(limit + 1, container), limit) is None  # too deep: too_deep tells
    assert encoded_size([2**70], limit) is None  # not what orjson writes: measured the other way
    assert encoded_size("scalar", limit) is None


def test_too_deep_at_keeps_the_encoding_of_what_it_found_within_the_limit() -> None:
    import orjson

    from kinformer.server.machinery.nesting import encoding_of, too_deep_at

    entries = [{"manager": "m", "fieldsV1": _nested(MAX_DEPTH - 5, "dict")}]
    assert not too_deep_at(entries, 3)
    assert encoding_of(entries) == orjson.dumps(entries)
    twin = orjson.loads(orjson.dumps(entries))  # an equal object, not the one measured: encoded afresh
    assert encoding_of(twin) == orjson.dumps(twin) and encoding_of({"a": 1}) == b'{"a":1}'
    deeper = [{"manager": "m", "fieldsV1": _nested(MAX_DEPTH - 2, "dict")}]
    assert too_deep_at(deeper, 3) and encoding_of(entries) == orjson.dumps(entries)  # refused: not kept
    big = [{"manager": "m", "n": 2**70}]  # not what orjson writes: walked, not kept
    assert not too_deep_at(big, 3) and encoding_of(entries) == orjson.dumps(entries)


def test_yaml_numbers_beyond_conversion_limits_are_a_400() -> None:
    assert _refused(b"a: " + b"1" * 5000).code == 400
    assert _refused(b"a: 1.0e+999").code == 400


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                                   "image/png", "application/xml"])
def test_media_types_kube_does_not_accept_are_415(ctype: str) -> None:
    err = _refused(b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}', ctype)
    assert (err.code, err.reason) == (415, "UnsupportedMediaType")


def test_body_without_content_type_is_json_else_yaml() -> None:
    for ctype in ("", "application/octet-stream", "*/*"):
        assert parse_document(b'{"a": 1}', ctype) == {"a": 1}
        assert parse_document(b"a: 1\n", ctype) == {"a": 1}


async def test_a_decoded_replacement_body_is_read_as_its_json() -> None:
    """A conversion's object (OBJECT_KEY) replaces the request's body: read_body answers its JSON and a protobuf
    request's content type is JSON by then."""
    from aiohttp.test_utils import make_mocked_request

    from kinformer.server.endpoints.bodies import OBJECT_KEY, content_type, read_body

    request = make_mocked_request("POST", "/api/v1/namespaces/default/events",
                                  headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
    request[OBJECT_KEY] = {"kind": "Event", "metadata": {"name": "e"}}
    assert await read_body(request) == b'{"kind":"Event","metadata":{"name":"e"}}'
    assert content_type(request) == "application/json"
