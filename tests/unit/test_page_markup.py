"""The page's relative times and escaping: words as people say them, the ISO time kept."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from cronlease.web.markup import e, outcome_strip, relative

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("offset", "words"),
    [
        (0.4, "now"),
        (-12, "12 s ago"),
        (12, "in 12 s"),
        (-180, "3 min ago"),
        (3599, "in 59 min"),
        (-7200, "2 h ago"),
        (86400 * 4, "in 4 d"),
    ],
)
def test_relative_times_keep_the_iso_time_on_hover(offset: float, words: str) -> None:
    moment = (NOW + timedelta(seconds=offset)).isoformat().replace("+00:00", "Z")
    assert relative(moment, NOW) == f'<time datetime="{moment}" title="{moment}">{words}</time>'


def test_a_zone_offset_is_kept_and_no_time_is_a_dash() -> None:
    istanbul = "2026-12-01T15:00:30+03:00"  # 12:00:30 UTC
    assert f'title="{istanbul}">in 30 s<' in relative(istanbul, NOW)
    assert relative(None, NOW) == "-"


def test_the_strip_is_oldest_first_and_escaped() -> None:
    strip = outcome_strip(["failed", "succeeded", "<b>"])  # newest first, as the model keeps them
    assert strip.index('class="o-&lt;b&gt;"') < strip.index("o-succeeded") < strip.index("o-bad")
    assert outcome_strip([]) == "-" and e("") == "-" and e("\u202e") == "\\u202e"
