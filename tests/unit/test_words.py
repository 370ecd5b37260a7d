"""A schedule in words (the status page's schedule column): read from the fields, never guessed."""

from __future__ import annotations

import pytest

from cronlease._timing.schedule import Schedule
from cronlease._timing.words import describe


@pytest.mark.parametrize(
    ("every", "words"),
    [
        ("1s", "every second"),
        ("1m", "every minute"),
        ("5m", "every 5 minutes"),
        ("90s", "every 1 minute 30 seconds"),
        ("1h", "every hour"),
        ("2d", "every 2 days"),
    ],
)
def test_intervals(every: str, words: str) -> None:
    assert describe(Schedule.every(every)) == words


@pytest.mark.parametrize(
    ("cron", "words"),
    [
        ("* * * * *", "every minute"),
        ("*/5 * * * *", "every 5 minutes"),
        ("0,15,30,45 * * * *", "every 15 minutes"),  # the fields, not the text
        ("0-59/15 * * * *", "every 15 minutes"),
        ("0 * * * *", "every hour"),
        ("@hourly", "every hour"),
        ("15 * * * *", "every hour at :15"),
        ("0 */2 * * *", "every 2 hours"),
        ("30 */6 * * *", "every 6 hours at :30"),
        ("0 2 * * *", "at 02:00 every day"),
        ("0 9,17 * * *", "at 09:00, 17:00 every day"),
        ("30 9 * * 1-5", "at 09:30 on weekdays"),
        ("0 10 * * sat,sun", "at 10:00 on weekends"),
        ("0 3 * * 0", "at 03:00 on Sun"),
        ("0 3 * * 7,1", "at 03:00 on Mon, Sun"),
        ("*/10 9-17 * * 1-5", "every 10 minutes from 09:00 to 17:59 on weekdays"),
        ("* 9,13 * * *", "every minute during hour 9, 13"),
        ("0 0 1 * *", "at 00:00 on day 1 of the month"),
        ("0 0 1 1 *", "at 00:00 on day 1 of the month in Jan"),
        # cron(5): both day fields restricted means either one
        ("0 0 13 * 5", "at 00:00 on day 13 of the month or on Fri"),
        # 5 rows: 5 is a step of 60 (every 5 minutes) but not of 24
        ("7,19,33 3,9,12 * * *", "at minute 7, 19, 33 past hour 3, 9, 12"),
        ("0 1-5 * * *", "at minute 0 past hour 1-5"),
    ],
)
def test_crontabs(cron: str, words: str) -> None:
    assert describe(Schedule.cron(cron)) == words
