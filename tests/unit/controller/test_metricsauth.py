"""MetricsAuth's decisions and caches, against a stand-in for the API server's review APIs."""

from __future__ import annotations

from typing import Any

from kinformer.clock import FakeClock
from kinformer.controller.metricsauth import ACCESS_REVIEWS, TOKEN_REVIEWS, MetricsAuth
from kinformer.errors import Forbidden


class Reviews:
    """Answers TokenReviews from ``users`` (token -> user name) and SubjectAccessReviews from ``allowed``."""

    def __init__(self) -> None:
        self.users = {"t-scraper": "scraper", "t-other": "other"}
        self.allowed = {"scraper"}
        self.asked: list[str] = []
        self.fail = False

    async def create(self, resource: str, body: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(resource)
        if self.fail:
            raise Forbidden("no reviews for you", code=403)
        spec = body["spec"]
        if resource == TOKEN_REVIEWS:
            name = self.users.get(spec["token"])
            return {"status": {"authenticated": True, "user": {"username": name, "groups": ["g"]}} if name
                    else {"authenticated": False}}
        assert resource == ACCESS_REVIEWS and spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": spec["user"] in self.allowed}}


async def test_verdicts_and_what_is_asked_of_the_server() -> None:
    reviews = Reviews()
    auth = MetricsAuth(reviews, clock=FakeClock())
    assert (await auth.check(None, "GET", "/metrics")).status == 401
    assert (await auth.check("Basic abc", "GET", "/metrics")).status == 401
    assert reviews.asked == []  # nothing to ask without a bearer token
    assert (await auth.check("Bearer unknown", "GET", "/metrics")).status == 401
    denied = await auth.check("Bearer t-other", "GET", "/metrics")
    assert (denied.status, denied.message) == (403, "Authorization denied for user other")
    assert (await auth.check("bearer t-scraper", "GET", "/metrics")).status == 200


async def test_answers_are_cached_for_their_ttls() -> None:
    clock, reviews = FakeClock(), Reviews()
    auth = MetricsAuth(reviews, clock=clock)
    assert (await auth.check("Bearer t-other", "GET", "/metrics")).status == 403
    reviews.allowed.add("other")
    assert (await auth.check("Bearer t-other", "GET", "/metrics")).status == 403  # denial cached 30 s
    asked = len(reviews.asked)
    clock.step(30)
    assert (await auth.check("Bearer t-other", "GET", "/metrics")).status == 200
    assert reviews.asked[asked:] == [ACCESS_REVIEWS]  # the token review (60 s) still cached
    del reviews.users["t-other"]
    clock.step(30)
    assert (await auth.check("Bearer t-other", "GET", "/metrics")).status == 401  # token review expired


async def test_caches_are_bounded_and_server_failures_answer_500() -> None:
    clock, reviews = FakeClock(), Reviews()
    auth = MetricsAuth(reviews, clock=clock, max_entries=3)
    for i in range(10):
        await auth.check(f"Bearer guess-{i}", "GET", "/metrics")
    assert len(auth._users) == 3
    reviews.fail = True
    verdict = await auth.check("Bearer t-scraper", "GET", "/metrics")
    assert verdict.status == 500 and verdict.message == "Authentication failed"
