"""Request bodies: reading them (bounded), decoding JSON / YAML / protobuf documents, and their first checks.

YAML is converted to JSON data the way sigs.k8s.io/yaml does before kube decodes it; a body that is
not a document of the expected shape is a 400 Status, an unknown content type a 415.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import yaml
from aiohttp import web

from . import status as st
from .registry import ResourceInfo

MAX_BODY = 3 * 1024 * 1024
# Bodies sent without a meaningful type (no header, or a client's default) are sniffed: JSON, else YAML.
_GENERIC_TYPES = ("application/octet-stream", "*/*", "text/plain")


def content_type(request: web.Request) -> str:
    raw = request.headers.get("Content-Type", "")
    return raw.split(";", 1)[0].strip().lower()


async def read_body(request: web.Request) -> bytes:
    """The request body; 413 when it exceeds 3 MiB."""
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise st.StatusError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY}")
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise st.StatusError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY}") from None


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


def parse_document(body: bytes, content_type: str) -> Any:
    """Decode a JSON / YAML / Kubernetes-protobuf body; 400 on malformed input, 415 on an unknown type."""
    if not body.strip():
        raise st.bad_request("the body of the request was empty")
    if content_type in _GENERIC_TYPES:
        content_type = ""
    if content_type in ("", "application/json") or content_type.endswith("+json"):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as e:
            if content_type.endswith("+json") or content_type == "application/json":
                raise st.bad_request(f"couldn't get version/kind; json parse error: {e}") from None
    if content_type in ("", "application/yaml", "application/x-yaml", "text/yaml") or content_type.endswith("+yaml"):
        try:
            return _to_json_value(yaml.load(body, Loader=_JSONYamlLoader))
        except (yaml.YAMLError, _NotJSON, RecursionError) as e:
            raise st.bad_request(f"error converting YAML to JSON: {e}") from None
    if content_type == "application/vnd.kubernetes.protobuf":
        from .protobuf import decode_k8s_protobuf

        try:
            return decode_k8s_protobuf(body)
        except Exception as e:
            raise st.bad_request(f"unable to decode protobuf body: {e}") from None
    raise st.unsupported_media_type(content_type)


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
