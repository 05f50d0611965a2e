"""Request bodies: reading them (bounded), decoding JSON / YAML / protobuf documents, and their first checks.

YAML is converted to JSON data the way sigs.k8s.io/yaml does before kube decodes it; a body that is
not a document of the expected shape is a 400 Status, an unknown content type a 415.

The decoding limits, all answered before anything is built from the body:

* :data:`MAX_BODY` bytes read (413 ``RequestEntityTooLarge``), as kube-apiserver's ``--max-request-bytes``
  default, within :data:`BODY_TIMEOUT` seconds (408 ``Timeout``; kube's request timeout), so a client
  trickling its body cannot hold a seat of flow control for long.
* :data:`MAX_DEPTH` levels of nesting in any decoded document (400): well under the 254 levels the JSON
  writer accepts, so whatever was read can be written back.
* YAML aliases: a document is measured on its alias graph before it is expanded (no copy is made to
  measure it). Refused (400): cycles; more than :data:`MAX_EXPANDED_BYTES` once expanded; and
  excessive aliasing by the rule kube's YAML decoder applies (more than 100 aliased nodes among more
  than 1000 and a share of aliased nodes above 99 %, falling to 10 % as documents grow from 400 000 to
  4 000 000 nodes).
* Media types: JSON, YAML and Kubernetes protobuf, as kube accepts. A body without a meaningful type (no
  header, ``application/octet-stream`` or ``*/*``: HTTP libraries' defaults, which a browser cannot send
  cross-site without a preflight) is read as JSON, else YAML. Anything else is a 415, in particular
  ``text/plain`` and the form encodings, the types a page may send cross-site without asking.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import orjson
import yaml
from aiohttp import web

from ..machinery import status as st
from ..machinery.nesting import DEPTH_MESSAGE as _DEPTH_MESSAGE
from ..machinery.nesting import MAX_DEPTH, too_deep
from ..registry.resources import ResourceInfo

MAX_BODY = 3 * 1024 * 1024
BODY_TIMEOUT = 60.0
MAX_EXPANDED_BYTES = 2 * MAX_BODY
# Bodies sent without a meaningful type (no header, or an HTTP library's default) are sniffed: JSON, else YAML.
_GENERIC_TYPES = ("application/octet-stream", "*/*")
_JSON_TYPES = ("", "application/json")
_YAML_TYPES = ("", "application/yaml", "application/x-yaml", "text/yaml")


def content_type(request: web.Request) -> str:
    """The request body's media type; a protobuf body replaced through :data:`BODY_KEY` or :data:`OBJECT_KEY` is
    JSON by then."""
    ctype = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
    if ctype == "application/vnd.kubernetes.protobuf" and (
            request.get(BODY_KEY) is not None or request.get(OBJECT_KEY) is not None):
        return "application/json"
    return ctype


# A body that replaces the request's own (set by CRD conversion, which serves a request through another version).
BODY_KEY: Any = web.RequestKey("kinformer.body", bytes) if hasattr(web, "RequestKey") else "kinformer.body"
# The same, decoded: an object of the handler's own (a built-in's conversion made it for this request alone), taken
# by a create or update as its body as is; :func:`read_body` answers its JSON.
OBJECT_KEY: Any = (web.RequestKey("kinformer.body_object", dict) if hasattr(web, "RequestKey")
                   else "kinformer.body_object")
# The object a create answered with (the response's body is its JSON): the watch cache's, read-only. A conversion
# serving the create through another version converts it instead of decoding the answer again.
ANSWER_OBJECT_KEY: Any = (web.RequestKey("kinformer.answer_object", dict) if hasattr(web, "RequestKey")
                          else "kinformer.answer_object")
# The version a client sent a request to that is served through a built-in's storage version (admission matches it).
REQUEST_VERSION_KEY: Any = (web.RequestKey("kinformer.request_version", str) if hasattr(web, "RequestKey")
                            else "kinformer.request_version")

async def read_body(request: web.Request, timeout: float | None = None) -> bytes:
    """The request body; 413 when it exceeds 3 MiB, 408 when it takes longer than ``timeout`` (BODY_TIMEOUT).

    A body put in ``request[BODY_KEY]`` (CRD conversion serving a request through another version) replaces it,
    as does the JSON of an object put in ``request[OBJECT_KEY]``.
    """
    override = request.get(BODY_KEY)
    if override is not None:
        return override
    replaced = request.get(OBJECT_KEY)
    if replaced is not None:
        return orjson.dumps(replaced)
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise st.StatusError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY}")
    limit = BODY_TIMEOUT if timeout is None else timeout
    try:
        if request.content.is_eof():  # all of it has arrived (small bodies, nearly always): no wait to bound
            return await request.read()
        async with asyncio.timeout(limit):
            return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise st.StatusError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY}") from None
    except TimeoutError:
        raise st.StatusError(408, "Timeout", f"Timeout: the request body did not arrive within {limit:g}s",
                             headers={"Connection": "close"}) from None


class _JSONYamlLoader(yaml.SafeLoader):
    """A safe YAML loader that, like sigs.k8s.io/yaml, leaves unquoted dates and times as strings."""


_JSONYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _NotJSON(ValueError):
    """A YAML value with no JSON equivalent."""


def _yaml_key(key: Any) -> str:
    """A mapping key as JSON sees it: scalars are stringified (``true``/``false``/``null`` spelled the YAML way)."""
    if isinstance(key, str):
        return _json_string(key)
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return str(key)
    raise _NotJSON(f"unsupported map key of type {type(key).__name__}")


def _json_string(text: str) -> str:
    """``text`` with escaped UTF-16 surrogate pairs joined; a lone surrogate is not valid JSON text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return text.encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeDecodeError:
            raise _NotJSON("invalid Unicode: unpaired surrogate in string") from None
    return text


def _to_json_value(value: Any) -> Any:
    """A YAML document as JSON data (kube converts YAML to JSON before decoding); :class:`_NotJSON` otherwise."""
    if isinstance(value, str):
        return _json_string(value)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _NotJSON(f"unsupported value: {value}")
        return value
    if isinstance(value, dict):
        return {_yaml_key(k): _to_json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_json_value(v) for v in value]
    raise _NotJSON(f"unsupported value of type {type(value).__name__}")


def parse_document(body: bytes, content_type: str, bounded: Callable[[Any], bool] | None = None) -> Any:
    """Decode a JSON / YAML / Kubernetes-protobuf body; 400 on malformed input, 415 on an unknown type.

    ``bounded`` (see :func:`load_json`) may spare a JSON document the depth measure.
    """
    if not body.strip():
        raise st.bad_request("the body of the request was empty")
    if content_type in _GENERIC_TYPES:
        content_type = ""
    if content_type in _JSON_TYPES or content_type.endswith("+json"):
        try:
            return load_json(body, bounded)
        except orjson.JSONDecodeError as e:
            if content_type:
                raise st.bad_request(f"couldn't get version/kind; json parse error: {e}") from None
    if content_type in _YAML_TYPES or content_type.endswith("+yaml"):
        if body.lstrip()[:1] == b"{":  # JSON is YAML: a JSON body decodes the fast way (a YAML parse is ~30x slower)
            try:
                return load_json(body, bounded)
            except orjson.JSONDecodeError:
                pass
        return load_yaml(body)
    if content_type == "application/vnd.kubernetes.protobuf":
        from ..schema.protobuf import decode_k8s_protobuf

        try:
            doc = decode_k8s_protobuf(body)
        except Exception as e:
            raise st.bad_request(f"unable to decode protobuf body: {e}") from None
        if too_deep(doc):
            raise st.bad_request(f"unable to decode protobuf body: {_DEPTH_MESSAGE}")
        return doc
    raise st.unsupported_media_type(content_type)


# Fewer bytes than this are read for a bracket count before the nesting is measured (a count is cheaper than a
# measure for small bodies, which seldom hold more than MAX_DEPTH brackets; large ones nearly always do).
_COUNT_BELOW = 2048


def load_json(body: bytes | str, bounded: Callable[[Any], bool] | None = None) -> Any:
    """``orjson.loads`` that also refuses documents nested deeper than :data:`MAX_DEPTH` (as a JSONDecodeError).

    ``bounded``, when given, is a check of the document that answers True only for one within :data:`MAX_DEPTH`
    (a built-in kind's schema as typed structs: :mod:`structcheck`): the depth is measured only when it answers
    False, so the outcome is the same with or without it.
    """
    doc = orjson.loads(body)
    if len(body) < _COUNT_BELOW:
        raw = body.encode() if isinstance(body, str) else body
        if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
            return doc
    if bounded is not None and bounded(doc):
        return doc
    if too_deep(doc):
        raise orjson.JSONDecodeError(_DEPTH_MESSAGE, "", 0)
    return doc


def load_yaml(body: bytes) -> Any:
    """A YAML body as JSON data, its alias graph measured (:func:`_check_aliases`) before it is expanded."""
    try:
        doc = yaml.load(body, Loader=_JSONYamlLoader)
        _check_aliases(doc)
        return _to_json_value(doc)
    except (yaml.YAMLError, ValueError, RecursionError) as e:
        raise st.bad_request(f"error converting YAML to JSON: {e}") from None


def _allowed_alias_ratio(nodes: int) -> float:
    """The share of aliased nodes kube's YAML decoder tolerates in a document of ``nodes`` nodes."""
    low, high = 400_000, 4_000_000
    if nodes <= low:
        return 0.99
    if nodes >= high:
        return 0.10
    return 0.99 - 0.89 * (nodes - low) / (high - low)


def _check_aliases(doc: Any) -> None:
    """Raise :class:`_NotJSON` when ``doc`` (as YAML loaded it: aliases are shared containers) would expand
    into a cycle, more than :data:`MAX_DEPTH` levels, more than :data:`MAX_EXPANDED_BYTES`, or mostly aliases.

    Each distinct container is visited once; a container met again is an alias and counts its
    expanded size without being walked, so the cost is linear in the body, whatever it expands to.
    """
    measured: dict[int, tuple[int, int, int]] = {}  # id -> (nodes, bytes, height) once expanded
    on_path: set[int] = set()
    aliased = 0

    def visit(node: Any, depth: int) -> tuple[int, int, int]:
        nonlocal aliased
        if not isinstance(node, dict | list):
            return 1, len(node) + 2 if isinstance(node, str) else 8, 0
        key = id(node)
        seen = measured.get(key)
        if seen is not None:
            aliased += seen[0]
        elif key in on_path:
            raise _NotJSON("yaml: document contains a cyclic alias")
        else:
            if depth > MAX_DEPTH:
                raise _NotJSON(_DEPTH_MESSAGE)
            on_path.add(key)
            nodes, size, height = 1, 2, 0
            pairs = node.items() if isinstance(node, dict) else ((None, v) for v in node)
            for k, v in pairs:
                n, b, h = visit(v, depth + 1)
                nodes, size, height = nodes + n, size + b + 1, max(height, h)
                if k is not None:
                    size += len(str(k)) + 3
            on_path.discard(key)
            seen = measured[key] = (nodes, size, height + 1)
        if depth + seen[2] - 1 > MAX_DEPTH:
            raise _NotJSON(_DEPTH_MESSAGE)
        return seen

    nodes, size, _ = visit(doc, 1)
    if aliased > 100 and nodes > 1000 and aliased / nodes > _allowed_alias_ratio(nodes):
        raise _NotJSON("yaml: document contains excessive aliasing")
    if size > MAX_EXPANDED_BYTES:
        raise _NotJSON(f"yaml: document expands to more than {MAX_EXPANDED_BYTES} bytes")


def decode_object(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise st.bad_request("Object 'Kind' is missing in the request body: expected a JSON object")
    meta = doc.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise st.bad_request("json: cannot unmarshal into Go struct field Object.metadata of type v1.ObjectMeta")
    return doc


def check_kind(info: ResourceInfo, obj: Mapping[str, Any]) -> None:
    """400 when the body names another kind/version, or (built-ins) has a non-object spec or status."""
    if info.builtin:
        for part in ("spec", "status"):
            value = obj.get(part)
            if value is not None and not isinstance(value, dict):
                raise st.bad_request(f"json: cannot unmarshal {type(value).__name__} into Go struct field "
                                     f"{info.kind}.{part}")
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if kind and kind != info.kind:
        raise st.bad_request(f"the kind of the object ({kind}) does not match the expected kind ({info.kind})")
    if api_version and api_version != info.api_version:
        raise st.bad_request(f"the API version in the data ({api_version}) does not match the expected API "
                             f"version ({info.api_version})")


def check_delete_options(opts: Mapping[str, Any]) -> None:
    """400 when DeleteOptions fields do not have their Go types (kube fails to decode such a body)."""
    pre = opts.get("preconditions")
    if pre is not None:
        if not isinstance(pre, dict):
            raise st.bad_request("json: cannot unmarshal into Go struct field DeleteOptions.preconditions of type "
                                 "v1.Preconditions")
        for field in ("uid", "resourceVersion"):
            if pre.get(field) is not None and not isinstance(pre[field], str):
                raise st.bad_request(f"json: cannot unmarshal into Go struct field Preconditions.preconditions."
                                     f"{field} of type string")
    policy = opts.get("propagationPolicy")
    if policy is not None and not isinstance(policy, str):
        raise st.bad_request("json: cannot unmarshal into Go struct field DeleteOptions.propagationPolicy of type "
                             "v1.DeletionPropagation")
    orphan = opts.get("orphanDependents")
    if orphan is not None and not isinstance(orphan, bool):
        raise st.bad_request("json: cannot unmarshal into Go struct field DeleteOptions.orphanDependents of type bool")
