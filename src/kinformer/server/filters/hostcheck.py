"""Defences of a loopback-only server against web pages: DNS rebinding and cross-site requests.

A server bound to a loopback address (``kinformer serve --no-tls`` on 127.0.0.1, the embedded test
server) often runs without authentication, so any page open in a browser on the same machine could
try to talk to it:

* **DNS rebinding**: a page at ``http://evil.example:PORT`` whose name is re-pointed to 127.0.0.1 sends
  requests the browser considers same-origin. They carry ``Host: evil.example:PORT``; this server only
  answers requests whose ``Host`` is a loopback name or address (``localhost``, ``*.localhost``,
  127.0.0.0/8, ``[::1]``; any port) or one of ``allowed_hosts``.
* **Cross-site requests**: a page may POST to ``http://127.0.0.1:PORT`` without asking first when the
  body is a form or ``text/plain`` (those are 415 here, see :mod:`.endpoints.bodies`), and may send other methods
  when the server answers a CORS preflight (it never does). Such requests carry an ``Origin`` header
  naming the page; a request whose ``Origin`` is not a loopback origin is refused.

Both refusals are 403 ``Forbidden`` Status answers. Requests without ``Host`` or ``Origin`` headers
(non-browser clients speaking HTTP/1.0, say) are not affected. Servers bound to other addresses need
TLS and authentication (see :mod:`.apiserver`) and are not checked here.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from aiohttp import hdrs, web

from ..machinery import status as st

__all__ = ["host_check", "is_loopback_host"]


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or address, without port) names the local machine."""
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_of(header: str) -> str:
    """The host part of a ``Host`` header value (``name``, ``name:port``, ``[v6]:port``)."""
    header = header.strip()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def host_check(allowed_hosts: Iterable[str] = ()) -> Callable[[web.Request], web.Response | None]:
    """The check refusing non-loopback ``Host`` (unless in ``allowed_hosts``) and ``Origin`` headers: the 403
    answer of a refused request, None for the others (the first filter of :mod:`.handlerchain`)."""
    extra = {h.lower() for h in allowed_hosts}

    @functools.lru_cache(maxsize=256)  # a few Host values recur on every request; parsing addresses is not free
    def allowed(host: str) -> bool:
        return is_loopback_host(host) or host.lower() in extra

    @functools.lru_cache(maxsize=256)
    def allowed_header(header: str) -> bool:
        return allowed(_host_of(header))

    def check(request: web.Request) -> web.Response | None:
        headers = request.headers
        host = headers.get(hdrs.HOST)  # an istr key: multidict skips folding its case
        if host is not None and not allowed_header(host):
            return st.StatusError(403, "Forbidden", f'host "{_host_of(host)[:100]}" is not allowed: this server '
                                  "answers only requests addressed to a loopback name or address").response()
        origin = headers.get(hdrs.ORIGIN)
        if origin is not None and not allowed(urlsplit(origin).hostname or ""):
            return st.StatusError(403, "Forbidden", f'origin "{origin[:100]}" is not allowed: this server '
                                  "answers no cross-site requests").response()
        return None

    return check
