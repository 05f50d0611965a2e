"""PartialObjectMetadata answers: objects reduced to their metadata, as kube-apiserver serves them.

A client that sends ``Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`` on a list
gets a ``meta.k8s.io/v1`` ``PartialObjectMetadataList`` whose items are ``PartialObjectMetadata`` (kind,
apiVersion, the object's ``metadata``); ``as=PartialObjectMetadata`` does the same for a get and for the
objects of a watch's events (client-go's metadata informers). ``v1beta1`` is served too. Everything else
(selectors, pagination, resourceVersions, errors) behaves exactly as for JSON: the JSON answer is built as
usual and then cut down; only the ``metadata`` members are decoded (msgspec skips the rest unparsed).

An ``Accept`` header whose preferred clause asks for a form this request cannot take (a list as
``PartialObjectMetadata``, a get as a List) and that offers no plain-JSON fallback is answered 406, as kube does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web

from ..machinery import status as st
from .accept import accept_clauses

__all__ = ["PARTIAL_WATCH_KEY", "PartialMetadataWatchResponse", "PartialRequest", "negotiate_partial",
           "partial_list", "partial_object"]

GROUP = "meta.k8s.io"
VERSIONS = ("v1", "v1beta1")
OBJECT_KIND = "PartialObjectMetadata"
LIST_KIND = "PartialObjectMetadataList"
_JSON_MEDIA = ("application/json", "application/*", "*/*")


@dataclass(frozen=True, slots=True)
class PartialRequest:
    """A negotiated metadata-only answer: which kind the client asked for, of which ``meta.k8s.io`` version."""

    kind: str
    version: str

    @property
    def api_version(self) -> str:
        return f"{GROUP}/{self.version}"

    def content_type(self, kind: str) -> str:
        return f"application/json;as={kind};g={GROUP};v={self.version}"


# The request storage key that turns a watch into a metadata-only watch.
PARTIAL_WATCH_KEY: Any = (web.RequestKey("kinformer.partial_watch", PartialRequest) if hasattr(web, "RequestKey")
                          else "kinformer.partial_watch")


def negotiate_partial(accept: str) -> PartialRequest | None:
    """The metadata-only form the ``Accept`` header prefers, or None for plain JSON (or anything else).

    Clauses are tried by descending ``q`` (ties keep their order); the first JSON clause decides: one without
    ``as=`` means plain JSON, one asking for PartialObjectMetadata(List) of a served version means that.
    """
    if OBJECT_KIND not in accept:
        return None
    for media, params in accept_clauses(accept):
        if media not in _JSON_MEDIA:
            continue
        kind = params.get("as")
        if kind is None:
            return None
        if kind in (OBJECT_KIND, LIST_KIND) and params.get("g") == GROUP and params.get("v") in VERSIONS:
            return PartialRequest(kind, params["v"])
    return None


def not_acceptable(partial: PartialRequest, wanted: str) -> st.StatusError:
    return st.StatusError(406, "NotAcceptable", f"only the following media types are accepted: "
                          f"application/json, application/json;as={wanted};g={GROUP};v={partial.version} "
                          f"(got as={partial.kind})")


class _Meta(msgspec.Struct):
    metadata: msgspec.Raw = msgspec.Raw(b"{}")


class _List(msgspec.Struct):
    metadata: msgspec.Raw = msgspec.Raw(b"{}")
    items: list[_Meta] = []


class _Event(msgspec.Struct):
    type: str
    object: msgspec.Raw


_decode_meta = msgspec.json.Decoder(_Meta).decode
_decode_list = msgspec.json.Decoder(_List).decode
_decode_event = msgspec.json.Decoder(_Event).decode


def _head(kind: str, api_version: str) -> bytes:
    return b'{"kind":"' + kind.encode() + b'","apiVersion":"' + api_version.encode() + b'","metadata":'


def partial_object(body: bytes, api_version: str = f"{GROUP}/v1") -> bytes:
    """One served object's JSON -> its PartialObjectMetadata JSON."""
    return _head(OBJECT_KIND, api_version) + bytes(_decode_meta(body).metadata) + b"}"


def partial_list(body: bytes, api_version: str = f"{GROUP}/v1") -> bytes:
    """A served list's JSON -> the PartialObjectMetadataList JSON (the list's metadata kept as it is)."""
    doc = _decode_list(body)
    head = _head(OBJECT_KIND, api_version)
    items = b",".join(head + bytes(item.metadata) + b"}" for item in doc.items)
    return _head(LIST_KIND, api_version) + bytes(doc.metadata) + b',"items":[' + items + b"]}"


def partial_event_line(line: bytes, api_version: str) -> bytes:
    """One watch event line: its object cut down to metadata (ERROR events pass unchanged)."""
    ev = _decode_event(line)
    if ev.type == "ERROR":
        return line
    obj = partial_object(bytes(ev.object), api_version)
    return b'{"type":"' + ev.type.encode() + b'","object":' + obj + b"}"


def respond(plain: web.Response, partial: PartialRequest, is_list: bool) -> web.Response:
    """The metadata-only form of a plain JSON get/list answer (error answers pass unchanged)."""
    body = plain.body
    if plain.status >= 300 or not isinstance(body, bytes):
        return plain
    kind = LIST_KIND if is_list else OBJECT_KIND
    data = partial_list(body, partial.api_version) if is_list else partial_object(body, partial.api_version)
    return web.Response(status=plain.status, body=data + b"\n", headers={"Content-Type": partial.content_type(kind)})


class PartialMetadataWatchResponse(web.StreamResponse):
    """A watch stream whose event objects are rewritten to PartialObjectMetadata as they are written (every
    write carries whole event lines; the watch writers never split one)."""

    def __init__(self, partial: PartialRequest, *, headers: Mapping[str, str]) -> None:
        super().__init__(status=200, headers=headers)
        self._api_version = partial.api_version

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        lines = [partial_event_line(line, self._api_version) for line in bytes(data).split(b"\n") if line.strip()]
        if lines:
            await super().write(b"\n".join(lines) + b"\n")


async def serve(api: Any, request: web.Request, target: Any, partial: PartialRequest) -> web.StreamResponse:
    """Answer a get, list or watch of ``target`` (a :class:`~kinformer.server.endpoints.routing.Target`) through ``api``
    (the resource handlers) in metadata-only form."""
    if target.watch or (not target.name and request.query.get("watch") in ("true", "1")):
        request[PARTIAL_WATCH_KEY] = partial
        return await api.watch(request, target)
    is_list = not target.name
    wanted = LIST_KIND if is_list else OBJECT_KIND
    if partial.kind != wanted:
        raise not_acceptable(partial, wanted)
    plain = await (api.list(request, target) if is_list else api.get(request, target))
    return respond(await _in_requested_version(api, request, target, plain), partial, is_list)


async def _in_requested_version(api: Any, request: web.Request, target: Any, plain: web.Response) -> web.Response:
    """A built-in served through its storage version: the answer in the client's version (v1 HPAs carry
    annotations v2 does not), before it is cut down."""
    from .bodies import REQUEST_VERSION_KEY

    version = request.get(REQUEST_VERSION_KEY)
    conversion = getattr(api, "conversion", None)
    if not version or conversion is None:
        return plain
    info = target.info
    desired = f"{info.group}/{version}" if info.group else version
    converted = await conversion.convert_response(plain, info, desired)
    return converted if isinstance(converted, web.Response) else plain
