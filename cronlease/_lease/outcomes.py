"""A run's outcome and what each one means, in one table every surface reads.

:data:`OUTCOMES` declares each outcome once with all its properties: whether a
finish records it, its part in a failure streak, the attempt that may follow
it, whether the page shows it as bad and whether the metrics declare its series
before the first run. The status rules, the page, the metrics, the retry policy
and the attempt statements read their sets from here (``tests/unit/test_outcomes.py``
pins each of them to the table). A new outcome is one row here and one in
:data:`Outcome`, plus the code that records it.

The stored value, the JSON value, the event's ``outcome`` and the metrics'
``outcome`` label are all the outcome's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
    "BAD_OUTCOMES",
    "FAILURE_OUTCOMES",
    "FINAL_OUTCOMES",
    "METRIC_OUTCOMES",
    "OUTCOMES",
    "RECOVERABLE_OUTCOMES",
    "RETRYABLE_OUTCOMES",
    "STREAK_ENDING_OUTCOMES",
    "STREAK_NEUTRAL_OUTCOMES",
    "Outcome",
    "OutcomeRules",
    "outcomes_where",
]

Outcome = Literal[
    "running", "succeeded", "failed", "lost", "timed_out", "interrupted", "abandoned", "missed"
]

#: a run's part in a failure streak (docs/design.md §5.28): it lengthens the streak,
#: ends it, or is passed over
Streak = Literal["counts", "ends", "passed"]
#: the attempt that may follow a slot's latest attempt (docs/design.md §4.11)
NextAttempt = Literal["retry", "recover"]


@dataclass(frozen=True)
class OutcomeRules:
    """One outcome and every rule that depends on which outcome a run has."""

    name: Outcome
    #: a finish may record it; the others are written by acquisitions (``running``, and
    #: ``abandoned`` by the sweep and the stuck watcher)
    final: bool
    streak: Streak
    #: None: no attempt follows (done, or it may still be running somewhere)
    next_attempt: NextAttempt | None
    #: shown red on the page: the slot's work was not done. Wider than the failures:
    #: a run interrupted by a shutdown or missed was not the task's fault (no streak),
    #: but an operator looking at the strip still needs to see the work is missing
    bad: bool
    #: its ``runs_total`` / ``later_attempts_total`` series exist at zero before the
    #: first run, so ``rate()`` and absent-series alerts on them work from the start
    metric_at_zero: bool
    #: what it means, for people
    meaning: str


OUTCOMES: Mapping[Outcome, OutcomeRules] = {
    rules.name: rules
    for rules in (
        OutcomeRules(
            "running",
            final=False,
            streak="passed",
            next_attempt="recover",  # once its lease expired: its holder died
            bad=False,
            metric_at_zero=False,
            meaning="the run is going (or its holder died and nobody swept it yet)",
        ),
        OutcomeRules(
            "succeeded",
            final=True,
            streak="ends",
            next_attempt=None,
            bad=False,
            metric_at_zero=True,
            meaning="the task returned",
        ),
        OutcomeRules(
            "failed",
            final=True,
            streak="counts",
            next_attempt="retry",
            bad=True,
            metric_at_zero=True,
            meaning="the task raised (a command exited non-zero)",
        ),
        OutcomeRules(
            "lost",
            final=True,
            streak="counts",
            # it may still be running somewhere: another attempt could overlap it
            next_attempt=None,
            bad=True,
            metric_at_zero=False,
            meaning="the run ended without a valid lease",
        ),
        OutcomeRules(
            "timed_out",
            final=True,
            streak="counts",
            next_attempt="retry",
            bad=True,
            metric_at_zero=False,
            meaning="the run took longer than its timeout",
        ),
        OutcomeRules(
            "interrupted",
            final=True,
            # a shutdown (a deploy), not the task failing
            streak="passed",
            next_attempt=None,
            bad=True,
            metric_at_zero=False,
            meaning="a shutdown stopped the run",
        ),
        OutcomeRules(
            "abandoned",
            final=False,
            streak="counts",
            next_attempt="recover",  # once its lease expired
            bad=True,
            metric_at_zero=False,
            meaning="its holder stopped renewing the lease mid-run",
        ),
        OutcomeRules(
            "missed",
            final=True,
            # the task was not called; the status says overdue for that
            streak="passed",
            next_attempt=None,
            bad=True,
            metric_at_zero=False,
            meaning="the lease was won past the tick's grace: the task was not called",
        ),
    )
}
if tuple(OUTCOMES) != get_args(Outcome):  # pragma: no cover - caught at import
    raise AssertionError("OUTCOMES and the Outcome type must list the same outcomes, in order")


def outcomes_where(test: Callable[[OutcomeRules], bool]) -> tuple[Outcome, ...]:
    """The outcomes whose rules pass ``test``, in the table's order."""
    return tuple(name for name, rules in OUTCOMES.items() if test(rules))


#: the outcomes a finish may record
FINAL_OUTCOMES: frozenset[Outcome] = frozenset(outcomes_where(lambda o: o.final))
#: a run that did not do its work: each one lengthens a failure streak
FAILURE_OUTCOMES: frozenset[Outcome] = frozenset(outcomes_where(lambda o: o.streak == "counts"))
#: a run that did its work: it ends a failure streak
STREAK_ENDING_OUTCOMES: frozenset[Outcome] = frozenset(outcomes_where(lambda o: o.streak == "ends"))
#: neither a failure nor a success: passed over, they neither count nor end a streak
STREAK_NEUTRAL_OUTCOMES: frozenset[Outcome] = frozenset(
    outcomes_where(lambda o: o.streak == "passed")
)
#: a retry may follow (after ``retry_delay``)
RETRYABLE_OUTCOMES: tuple[Outcome, ...] = outcomes_where(lambda o: o.next_attempt == "retry")
#: a recovery may follow, once the lease expired (its holder died)
RECOVERABLE_OUTCOMES: tuple[Outcome, ...] = outcomes_where(lambda o: o.next_attempt == "recover")
#: shown as bad (red) on the page
BAD_OUTCOMES: frozenset[Outcome] = frozenset(outcomes_where(lambda o: o.bad))
#: the metrics' outcome series declared at zero for every task
METRIC_OUTCOMES: tuple[Outcome, ...] = outcomes_where(lambda o: o.metric_at_zero)
