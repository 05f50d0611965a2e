"""The request log of ``kinformer serve -v``: one line per finished request (kube-apiserver's httplog).

``GET /api/v1/namespaces/default/pods?watch=1 user=alice 200 15012.3ms``: method, path with query, the
authenticated user ("-" when none), the status code and the time from receiving the request to the end of
the response (a watch is logged when it ends). Lines go to the ``kinformer.server.requests`` logger at
INFO; an APIServer built without ``log_requests`` has no logger installed and pays nothing.
"""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from kinformer.server.auth.authentication import USER_KEY

__all__ = ["REQUEST_LOG", "RequestLogger"]

REQUEST_LOG = logging.getLogger("kinformer.server.requests")


class RequestLogger(AbstractAccessLogger):
    """aiohttp access logger writing the line described in the module docstring."""

    __slots__ = ()

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        user = request.get(USER_KEY)
        name = getattr(user, "name", None) or "-"
        self.logger.info("%s %s user=%s %d %.1fms", request.method, request.path_qs, name, response.status,
                         time * 1000.0)

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)
