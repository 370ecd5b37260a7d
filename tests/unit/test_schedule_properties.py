"""Property tests of schedule parsing: valid input round-trips, any other is a ConfigError.

(The lease state machine's property test runs on real databases:
tests/contract/test_properties.py.)
"""

from __future__ import annotations

import contextlib
import string

import hypothesis.strategies as st
from hypothesis import given, settings

from cronlease import ConfigError, Schedule

# --- schedule parsing --------------------------------------------------------

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@given(
    parts=st.lists(st.tuples(st.integers(1, 500), st.sampled_from("smhd")), min_size=1, max_size=3)
)
def test_any_valid_duration_round_trips(parts: list[tuple[int, str]]) -> None:
    text = "".join(f"{n}{unit}" for n, unit in parts)
    seconds = sum(n * UNITS[unit] for n, unit in parts)
    schedule = Schedule.every(text)
    assert schedule.interval is not None
    assert schedule.interval.total_seconds() == seconds
    again = Schedule.every(schedule.expression)
    assert again.interval == schedule.interval
    assert again.fingerprint == schedule.fingerprint


def cron_field(low: int, high: int) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    ranged = st.tuples(value, value).map(lambda ab: f"{min(ab)}-{max(ab)}")
    stepped = st.tuples(st.sampled_from(["*", f"{low}-{high}"]), st.integers(1, high - low + 1))
    single = st.one_of(
        st.just("*"), value.map(str), ranged, stepped.map(lambda sn: f"{sn[0]}/{sn[1]}")
    )
    return st.lists(single, min_size=1, max_size=3).map(",".join)


valid_cron = st.tuples(
    cron_field(0, 59), cron_field(0, 23), cron_field(1, 28), cron_field(1, 12), cron_field(0, 7)
).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(expression=valid_cron)
def test_any_valid_cron_round_trips(expression: str) -> None:
    schedule = Schedule.cron(expression, timezone="Europe/Istanbul")
    again = Schedule.cron(schedule.expression, timezone="Europe/Istanbul")
    assert again.fingerprint == schedule.fingerprint
    assert schedule.ttl(schedule.upcoming(schedule.anchor, 1)[0]) >= 1.0


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=string.ascii_letters + string.digits + " */,-@#?LW", max_size=30))
def test_any_cron_input_is_accepted_or_a_config_error(text: str) -> None:
    with contextlib.suppress(ConfigError):
        Schedule.cron(text)


@settings(max_examples=200, deadline=None)
@given(value=st.one_of(st.text(max_size=12), st.floats(allow_nan=True), st.integers(-5, 0)))
def test_any_duration_input_is_accepted_or_a_config_error(value: object) -> None:
    try:
        schedule = Schedule.every(value)
    except ConfigError:
        return
    assert schedule.interval is not None and schedule.interval.total_seconds() >= 1
