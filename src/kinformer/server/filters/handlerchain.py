"""The request pipeline of the API server, as kube-apiserver's handler chain, in one aiohttp middleware.

Every request passes these filters in kube's order, each of which may answer it instead of the handler:

1. **Host check** (loopback-only servers, :mod:`.hostcheck`): 403 for a foreign ``Host`` or ``Origin``.
2. **Authentication** (:mod:`.auth.authentication`): 401 for a credential that fails (and, with anonymous requests off,
   for none); no credential is ``system:anonymous``; the user is stored as ``request[USER_KEY]`` and in
   ``CURRENT_USER``.
3. **Impersonation** (:mod:`.auth.impersonation`), only for requests with ``Impersonate-*`` headers.
4. **Per-client limits** (:mod:`.limits`): request rate, open watches (429 with ``Retry-After``).
5. **Flow control** (:mod:`.flowcontrol`): every request but watches starts within the event loop's turn
   budget (:mod:`.turnbudget`) and takes a seat (429 when refused).
6. **Authorization** (:mod:`.auth.authorization`): 403 for what RBAC does not allow.
7. **The handler**, with its exceptions mapped to ``Status`` answers (a crash is a logged 500) and the
   resource API's request metrics recorded around it (the code counted is the one sent).

Health probes (``/healthz``, ``/livez``, ``/readyz`` and below) are authenticated and authorized like any
request (kube opens them to everybody through ``system:public-info-viewer``) but skip the limits and flow
control, as kube's ``probes`` flow schema puts them on the exempt priority level.

One coroutine running the filters and the handler one after the other, rather than one middleware per
filter, saves a coroutine frame and a dispatch per filter and request; the refusal of each filter is a
plain return, and what a request holds (a watch slot, a seat) is released in one ``finally``. The
application registers no aiohttp middleware: each route's handler is wrapped in a chain of its own
(:meth:`HandlerChain.wrapper`, :meth:`~.endpoints.routing.ResourceRouter.behind`), called with the request
alone, and so is the answer to a path without a route.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from ..auth.authentication import ANONYMOUS, CURRENT_USER, USER_KEY, Authenticator, InvalidToken, unauthorized
from ..auth.authorization import RBAC_GROUP, SUPERUSER_GROUP, Authorizer, authorize_fresh, forbidden, request_attributes
from ..auth.impersonation import asks_impersonation
from ..endpoints.bodies import MAX_BODY
from ..machinery import status as st
from .flowcontrol import FlowControl, Rejected, seat_context
from .limits import ClientLimits, client_key, is_health, may_watch
from .turnbudget import TurnTimeout

if TYPE_CHECKING:
    from ..app import Metrics
    from ..auth.authentication import RequestHook

__all__ = ["HandlerChain", "status_of"]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def status_of(request: web.Request, exc: Exception) -> web.StreamResponse | None:
    """The Status response for an exception a handler raised; None when it must propagate."""
    if isinstance(exc, st.StatusError):
        return exc.response()
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return st.StatusError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY}"
                              ).response()
    if isinstance(exc, web.HTTPNotFound):
        return st.route_not_found().response()
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return st.method_not_allowed().response()
    if isinstance(exc, (web.HTTPException, ConnectionResetError)):
        return None
    log.exception("internal error serving %s %s", request.method, request.path)
    return st.internal_error(f"{type(exc).__name__}: {exc}").response()


class HandlerChain:
    """The filters of one server (each None: not configured); :meth:`middleware` runs them (module docstring).

    Without an authenticator every request is anonymous; without an authorizer or flow control nothing is
    refused by them.
    """

    def __init__(self, *, host_check: Callable[[web.Request], web.StreamResponse | None] | None = None,
                 authenticator: Authenticator | None = None, impersonate: RequestHook | None = None,
                 limits: ClientLimits | None = None, flow_control: FlowControl | None = None,
                 authorizer: Authorizer | None = None) -> None:
        self.host_check = host_check
        self.authenticator = authenticator
        self.impersonate = impersonate
        self.limits = limits
        self.flow_control = flow_control
        self.authorizer = authorizer

    def wrapper(self, metrics: Metrics | None = None) -> Callable[[Handler], Handler]:
        """What wraps a route's handler in the chain: ``wrapper(metrics)(handler)`` is the handler behind the
        filters (``metrics``: where the resource API's requests are recorded)."""
        host_check, authenticator, impersonate = self.host_check, self.authenticator, self.impersonate
        limits, flow_control, authorizer = self.limits, self.flow_control, self.authorizer
        turns = flow_control.turns if flow_control is not None else None
        rate = limits.rate if limits is not None else None
        watches = limits.watches if limits is not None else None
        record = metrics.record if metrics is not None else None
        perf_counter = time.perf_counter

        def wrap(handler: Handler) -> Handler:
            async def chain(request: web.Request) -> web.StreamResponse:
                if host_check is not None:
                    refused = host_check(request)
                    if refused is not None:
                        return refused
                path = request.path
                try:
                    user = authenticator.authenticate(request) if authenticator is not None else ANONYMOUS
                except InvalidToken:
                    return unauthorized()
                if user is None:
                    return unauthorized()
                if impersonate is not None and asks_impersonation(request):
                    try:
                        user = await impersonate(request, user)
                    except st.StatusError as exc:
                        return exc.response()
                request[USER_KEY] = user
                CURRENT_USER.set(user)
                watch_key = None  # the client whose watch slot this request holds
                level = seat = None  # the flow-control seat it holds
                if not is_health(path):
                    key = None
                    if rate is not None:
                        key = client_key(request, user)
                        wait = rate.acquire(key)
                        if wait > 0:
                            return limits.too_many_requests(wait)  # type: ignore[union-attr]
                    if may_watch(request) and request_attributes(request).verb == "watch":
                        if watches is not None:  # long-running: a watch slot, no seat of flow control
                            key = key or client_key(request, user)
                            if not watches.try_acquire(key):
                                return limits.too_many_watches()  # type: ignore[union-attr]
                            watch_key = key
                    elif flow_control is not None:
                        level, flow = flow_control.classify(request, key, user)
                        if not turns.try_start():  # type: ignore[union-attr]
                            try:
                                await turns.wait(flow)  # type: ignore[union-attr]
                            except TurnTimeout as e:
                                return Rejected(f"Too many requests: {e}, please try again later.").response()
                        seat = level.try_acquire(flow)
                        if seat is None:
                            try:
                                seat = await level.acquire(flow)
                            except Rejected as e:
                                return e.response()
                        seat_context.set(seat)  # not reset: the request's task ends with it (see seat_context)
                try:
                    if authorizer is not None and SUPERUSER_GROUP not in user.groups:
                        attrs = request_attributes(request)
                        allowed, reason = await authorize_fresh(authorizer, user, attrs)
                        if not allowed:
                            return forbidden(user, attrs, reason).response()
                        if attrs.api_group == RBAC_GROUP and attrs.verb in ("create", "update", "patch"):
                            # escalation checks judge the writer's rules as the store has them
                            await authorizer.refresh()
                    rest = request.match_info.get("rest") if record is not None else None
                    start = perf_counter()
                    code = 500
                    try:
                        try:
                            resp = await handler(request)
                        except Exception as e:
                            mapped = status_of(request, e)
                            if mapped is None:
                                raise
                            resp = mapped
                        code = resp.status
                        return resp
                    finally:
                        if rest is not None:
                            record(request, rest, code, start)  # type: ignore[misc]
                finally:
                    if watch_key is not None:
                        watches.release(watch_key)  # type: ignore[union-attr]
                    if seat is not None:
                        level.release(seat)  # type: ignore[union-attr]

            return chain

        return wrap
