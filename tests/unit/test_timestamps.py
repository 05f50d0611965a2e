"""kinformer.timestamps: the text datetime's strftime gives, made once per second."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from kinformer import timestamps
from kinformer.timestamps import micro_time, rfc3339

EDGES = [0.0, 1.9999996, 1.9999995, 1.0000004, 1.0000005, -0.5, -1.0000004, 1_764_770_000.9999996,
         1_764_770_000.4999995, 1_764_770_000.0000005, 1_764_770_001, 4_102_444_799.999999]


def test_the_text_equals_datetimes_strftime_with_its_microsecond_rounding() -> None:
    rng = random.Random(7)
    walls = EDGES + [rng.uniform(0, 4e9) for _ in range(5000)]
    walls += [rng.randrange(0, 4_000_000_000) + rng.choice((0.9999995, 0.9999996, 0.0000005)) for _ in range(2000)]
    for wall in walls:
        moment = datetime.fromtimestamp(wall, UTC)
        assert rfc3339(wall) == moment.strftime("%Y-%m-%dT%H:%M:%SZ"), wall
        assert micro_time(wall) == moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), wall


def test_a_second_is_formatted_once_while_calls_stay_in_it() -> None:
    rfc3339(1_000_000_000.25)
    cached = timestamps._last
    assert cached[0] == 1_000_000_000
    assert micro_time(1_000_000_000.5) == cached[1] + ".500000Z" and timestamps._last is cached
    assert rfc3339(1_000_000_001.0) == "2001-09-09T01:46:41Z" and timestamps._last is not cached
