"""A statement with no answer at all (a network that drops packets) is an outage once it
has waited STALL_SECONDS: one line when it starts, dated from the wait's start, one
when it ends, and the end line counts the ticks that queued behind it."""

from __future__ import annotations

import logging

import pytest

from cronlease._events import DatabaseRecovered, DatabaseUnavailable, Event, EventBus
from cronlease._run.replica_log.outage import STALL_SECONDS, OutageLog
from cronlease._stats import Stats
from cronlease.errors import StoreError


class Clocks:
    def __init__(self) -> None:
        self.now = 1000.0  # monotonic
        self.wall = 1_800_000_000.0  # epoch

    def tick(self, seconds: float) -> None:
        self.now += seconds
        self.wall += seconds


def make(clocks: Clocks) -> tuple[OutageLog, list[Event]]:
    events = EventBus()
    seen: list[Event] = []
    events.listen(seen.append, DatabaseUnavailable, DatabaseRecovered)
    return OutageLog(Stats(), events, clock=lambda: clocks.now, wall=lambda: clocks.wall), seen


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_wait_past_the_threshold_is_one_outage_from_its_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clocks = Clocks()
    outage, seen = make(clocks)
    with caplog.at_level(logging.WARNING, logger="cronlease"):
        with outage.waiting("acquiring 9 ticks"):
            clocks.tick(STALL_SECONDS - 0.5)
            outage.watch()
            assert outage.down_for is None and not warnings(caplog)
            with outage.waiting("renewing this replica's fleet membership"):
                clocks.tick(1.0)
                outage.watch()  # the first wait is past the threshold
                assert outage.down_for == pytest.approx(STALL_SECONDS + 0.5)
                clocks.tick(STALL_SECONDS)
                outage.watch()  # the second one too: the same outage
                outage.failed("a tick", StoreError("timeout"), ticks=2)
                outage.succeeded()  # another statement answered: the waits still wait
                assert outage.down_for is not None
                for second in range(3):  # ticks decided meanwhile, not run
                    assert outage.absorbs(int(clocks.wall + second) * 1000)
        outage.succeeded()
    lines = warnings(caplog)
    assert lines == [
        "database unavailable: no answer for 6 s to acquiring 9 ticks (its ticks are skipped "
        "until it answers)",
        f"database available again after {2 * STALL_SECONDS + 0.5:.1f} s; 5 tick(s) were skipped",
    ]
    assert [type(e) for e in seen] == [DatabaseUnavailable, DatabaseRecovered]
    recovered = seen[1]
    assert isinstance(recovered, DatabaseRecovered) and recovered.skipped_ticks == 5
    assert outage.down_for is None and not outage.absorbs(int(clocks.wall) * 1000)


def test_a_wait_seen_only_when_it_ends_is_an_outage_all_the_same(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clocks = Clocks()
    outage, _ = make(clocks)
    with caplog.at_level(logging.WARNING, logger="cronlease"):
        with outage.waiting(lambda: "checking the slots of 3 tick(s)"):
            clocks.tick(STALL_SECONDS + 2)
        outage.succeeded()
        with outage.waiting("acquiring 1 tick"):  # a slow answer is not an outage
            clocks.tick(STALL_SECONDS - 0.1)
            outage.watch()
        outage.succeeded()
    assert warnings(caplog) == [
        "database unavailable: no answer for 7 s to checking the slots of 3 tick(s) (its ticks "
        "are skipped until it answers)",
        f"database available again after {STALL_SECONDS + 2:.1f} s; 0 tick(s) were skipped",
    ]


def test_the_end_line_waits_for_the_ticks_fired_before_the_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clocks = Clocks()
    outage, _ = make(clocks)
    woken: list[int] = []
    outage.defer_end(lambda: woken.append(1))
    began = clocks.wall
    with caplog.at_level(logging.WARNING, logger="cronlease"):
        with outage.waiting("acquiring 9 ticks"):
            clocks.tick(10.0)
            outage.watch()
        outage.succeeded()
        assert woken == [1] and outage.down_for is None
        assert outage.ending == (clocks.now, clocks.wall)
        # the backlog, decided after the answer: fired before the end, so the outage's
        backlog = [int(began + second) * 1000 for second in range(1, 11)]
        assert all(outage.absorbs(slot) for slot in backlog)
        assert not outage.absorbs(int(clocks.wall + 1) * 1000)  # fired after: its own
        assert warnings(caplog)[1:] == []
        outage.say_end()
        outage.say_end()  # said once
    end = "database available again after 10.0 s; 10 tick(s) were skipped"
    assert warnings(caplog)[1:] == [end]
    assert outage.ending is None


def test_a_new_failure_says_the_previous_end_first(caplog: pytest.LogCaptureFixture) -> None:
    clocks = Clocks()
    outage, _ = make(clocks)
    outage.defer_end(lambda: None)
    with caplog.at_level(logging.WARNING, logger="cronlease"):
        outage.failed("a tick", StoreError("refused"))
        clocks.tick(3.0)
        outage.succeeded()
        outage.failed("a tick", StoreError("refused"))
    lines = warnings(caplog)
    assert [line.split(",")[0].split(";")[0] for line in lines] == [
        "database unavailable",
        "database available again after 3.0 s",
        "database unavailable",
    ]


def test_a_wait_ended_by_an_error_is_said_with_that_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clocks = Clocks()
    outage, _ = make(clocks)
    error = StoreError("connection timeout expired")
    with caplog.at_level(logging.WARNING, logger="cronlease"):
        with pytest.raises(StoreError), outage.waiting("acquiring 1 tick"):
            clocks.tick(STALL_SECONDS)
            raise error
        outage.failed("a tick", error)
    assert warnings(caplog) == [
        f"database unavailable, a tick skipped (and later ticks until it answers): {error}"
    ]


def test_a_wait_sent_during_an_outage_that_answers_after_it_is_no_new_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A statement sent on a connection that died in the outage answers a while after
    another one ended it: still that outage's, not a second one."""
    clocks = Clocks()
    outage, seen = make(clocks)
    with caplog.at_level(logging.WARNING, logger="cronlease"):
        outage.failed("a tick", StoreError("connection timeout expired"))
        clocks.tick(20.0)
        with outage.waiting("checking the slots of 4 tick(s)"):
            clocks.tick(STALL_SECONDS - 1)
            outage.watch()
            outage.succeeded()  # a renewal answered: the outage is over
            clocks.tick(2.0)
            outage.watch()
        outage.succeeded()
    assert [type(e) for e in seen] == [DatabaseUnavailable, DatabaseRecovered]
    assert len(warnings(caplog)) == 2, warnings(caplog)
