"""An Indexed Job's ``successPolicy`` (kube 1.32 pkg/controller/job/success_policy.go): the Job succeeds
early once a rule matches the succeeded indexes.

A rule with ``succeededIndexes`` matches when those indexes all succeeded, or, with ``succeededCount``, when
at least that many of them did; a rule with only ``succeededCount`` matches when that many indexes
succeeded. Rules are tried in order; the message names the first that matched.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from .job_indexes import parse_indexes

__all__ = ["match_success_policy"]


def _rule_matches(rule: Mapping[str, Any], succeeded: Set[int], completions: int) -> bool:
    count = rule.get("succeededCount")
    if rule.get("succeededIndexes") is None:
        return count is not None and len(succeeded) >= count
    required = parse_indexes(rule["succeededIndexes"], completions)
    if not required:
        return False  # nothing parsed: the rule never matches
    done = len(required & succeeded)
    return done >= count if count is not None else done == len(required)


def match_success_policy(policy: Mapping[str, Any] | None, completions: int, succeeded: Set[int]) -> str | None:
    """The SuccessCriteriaMet message ("Matched rules at index N") when a rule matches, else None."""
    if policy is None or not succeeded:
        return None
    for index, rule in enumerate(policy.get("rules") or ()):
        if _rule_matches(rule, succeeded, completions):
            return f"Matched rules at index {index}"
    return None
