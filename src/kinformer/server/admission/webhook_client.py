"""Calling a webhook from the API server: where to send a review, whom to trust, how long to wait.

Shared by admission (AdmissionReview) and CRD conversion (ConversionReview).

``clientConfig.url`` must be an ``https`` URL with a host and no user information, query or fragment
(:func:`client_config_causes`, checked when a webhook configuration or a CRD is written, and again before
each call for configurations stored before the rule). ``clientConfig.service`` is resolved through the Service's
Endpoints object in this server (the address of its first subset with addresses, the port whose name
matches the Service port ``service.port``, default 443), with TLS verified for ``<name>.<namespace>.svc``:
a test points a Service at a local webhook server by creating that Service and an Endpoints object with
``127.0.0.1`` and the server's port. ``caBundle`` is the only trust for a call (no bundle: the system's).

Invariants: every failure to get a usable answer is a :class:`CallFailed` (``timeout`` set when the
deadline passed), never another exception. The answer is read to its end, however it is split on the wire,
and one over :data:`MAX_RESPONSE` bytes is such a failure. Redirects are never followed: a 3xx answer is a
failed call (the review, Secret data included, goes only where the configuration says).
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

__all__ = ["MAX_RESPONSE", "CallFailed", "WebhookClient", "client_config_causes"]

MAX_RESPONSE = 8 * 1024 * 1024

Lookup = Callable[[str, str, str], "Mapping[str, Any] | None"]


def url_problems(url: str) -> list[str]:
    """What makes ``url`` unusable as a webhook URL (kube's ``ValidateWebhookURL`` with https forced)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError as exc:
        return [f"url must be a valid URL: {exc}"]
    problems = []
    if parts.scheme != "https":
        problems.append("'https' is the only allowed URL scheme")
    if not parts.hostname:
        problems.append("host must be specified")
    if parts.username is not None or parts.password is not None:
        problems.append("user information is not permitted in the URL")
    if parts.fragment:
        problems.append("fragments are not permitted in the URL")
    if parts.query:
        problems.append("query parameters are not permitted in the URL")
    return problems


def client_config_causes(config: Any, path: str) -> list[dict[str, str]]:
    """Status causes for a webhook ``clientConfig`` at ``path``: exactly one of ``url`` and ``service``,
    and a url that :func:`url_problems` finds nothing wrong with."""
    if not isinstance(config, Mapping):
        return [{"reason": "FieldValueRequired", "field": path, "message": "Required value"}]
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [{"reason": "FieldValueRequired", "field": path,
                 "message": "Required value: exactly one of url or service is required"}]
    if url is None:
        return []
    if not isinstance(url, str):
        return [{"reason": "FieldValueInvalid", "field": f"{path}.url", "message": "Invalid value: must be a string"}]
    return [{"reason": "FieldValueInvalid", "field": f"{path}.url",
             "message": f"Invalid value: {url!r}: {problem}"} for problem in url_problems(url)]


class CallFailed(Exception):
    """A webhook could not give a usable answer; ``timeout`` when it did not answer in time."""

    def __init__(self, message: str, *, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


class WebhookClient:
    """Posts reviews to webhooks; owns one HTTP session and one TLS context per caBundle.

    ``lookup(resource, namespace, name)`` reads an object (``"core/services"``, ``"core/endpoints"``)
    from the server's cache, for ``service`` references.
    """

    def __init__(self, lookup: Lookup) -> None:
        self._lookup = lookup
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[bytes, ssl.SSLContext] = {}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _context(self, ca_bundle: str | None) -> ssl.SSLContext:
        try:
            raw = base64.b64decode(ca_bundle) if ca_bundle else b""
            ctx = self._contexts.get(raw)
            if ctx is None:
                ctx = ssl.create_default_context(cadata=raw.decode()) if raw else ssl.create_default_context()
                self._contexts[raw] = ctx
        except (ValueError, ssl.SSLError) as exc:
            raise CallFailed(f"invalid caBundle: {exc}") from None
        return ctx

    def target(self, config: Mapping[str, Any]) -> tuple[str, str | None]:
        """(URL to post to, TLS server name to verify when it differs from the URL's host)."""
        if config.get("url"):
            url = str(config["url"])
            problems = url_problems(url)
            if problems:
                raise CallFailed(f"invalid webhook URL {url!r}: {'; '.join(problems)}")
            return url, None
        svc = config.get("service") or {}
        ns, name = svc.get("namespace", ""), svc.get("name", "")
        port = int(svc.get("port") or 443)
        path = svc.get("path") or "/"
        service = self._lookup("core/services", ns, name)
        if service is None:
            raise CallFailed(f'service "{ns}/{name}" not found')
        port_name = next((p.get("name", "") for p in (service.get("spec") or {}).get("ports") or []
                          if p.get("port") == port), None)
        if port_name is None:
            raise CallFailed(f'service "{ns}/{name}" has no port {port}')
        endpoints = self._lookup("core/endpoints", ns, name) or {}
        for subset in endpoints.get("subsets") or []:
            addresses = subset.get("addresses") or []
            ports = subset.get("ports") or []
            match = next((p for p in ports if p.get("name", "") == port_name), ports[0] if len(ports) == 1 else None)
            if addresses and match is not None:
                return f"https://{addresses[0]['ip']}:{match['port']}{path}", f"{name}.{ns}.svc"
        raise CallFailed(f'service "{ns}/{name}" has no ready endpoints')

    async def post(self, config: Mapping[str, Any], review: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        """Send ``review`` to the webhook of ``config`` (a clientConfig); return its ``response`` object."""
        url, server_name = self.target(config)
        ctx = self._context(config.get("caBundle"))
        if self._session is None:
            self._session = aiohttp.ClientSession()
        try:
            async with asyncio.timeout(timeout):
                async with self._session.post(url, data=orjson.dumps(review), ssl=ctx, server_hostname=server_name,
                                              headers={"Content-Type": "application/json"},
                                              allow_redirects=False) as resp:
                    body = await _read_bounded(resp)
        except TimeoutError:
            raise CallFailed(f'failed to call webhook: Post "{url}": context deadline exceeded', timeout=True) from None
        except (aiohttp.ClientError, OSError, ssl.SSLError, ValueError) as exc:
            raise CallFailed(f'failed to call webhook: Post "{url}": {exc}') from None
        if body is None:
            raise CallFailed(f"the webhook answer is over {MAX_RESPONSE} bytes")
        if 300 <= resp.status < 400:
            raise CallFailed(f"failed to call webhook: the server answered a redirect ({resp.status}), which is "
                             "not followed")
        if resp.status != 200:
            raise CallFailed(f"failed to call webhook: the server responded with status {resp.status}")
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise CallFailed(f"received invalid webhook response: {exc}") from None
        response = doc.get("response") if isinstance(doc, dict) else None
        if not isinstance(response, dict):
            raise CallFailed(f"received invalid webhook response: no response in the {review.get('kind')}")
        return response


async def _read_bounded(resp: aiohttp.ClientResponse) -> bytes | None:
    """The whole body of ``resp``, read in as many pieces as it comes in; None once it passes MAX_RESPONSE."""
    if resp.content_length is not None and resp.content_length > MAX_RESPONSE:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > MAX_RESPONSE:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
