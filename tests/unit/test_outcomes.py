"""One table of outcomes (cronlease/_lease/outcomes.py): each consumer reads what it says.

The status rules, the page, the metrics, the retry policy and the attempt
statements are checked by what they do with each outcome, not by the name of
the set they import, so a consumer that goes back to a list of its own fails here.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from datetime import datetime, timezone
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from cronlease import Scheduler, Task
from cronlease._lease import outcomes
from cronlease._lease.model import FINAL_OUTCOMES, AttemptCandidate, FinishRequest
from cronlease._lease.outcomes import OUTCOMES, Outcome, OutcomeRules
from cronlease._run.recording.attempts import plan
from cronlease._status.rules import failure_streak
from cronlease._timing.schedule import slot_of
from cronlease.prometheus import instrument
from cronlease.web.markup import outcome_class

ROOT = Path(__file__).resolve().parents[2]
ALL: tuple[Outcome, ...] = typing.get_args(Outcome)
FIRE = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def job() -> None:
    pass


def test_the_type_and_the_table_list_the_same_outcomes_in_order() -> None:
    assert tuple(OUTCOMES) == ALL
    assert all(rules.name == name for name, rules in OUTCOMES.items())


def test_every_outcome_declares_every_property() -> None:
    hints = typing.get_type_hints(OutcomeRules)
    for rules in OUTCOMES.values():
        for field in dataclasses.fields(OutcomeRules):
            assert field.default is dataclasses.MISSING  # no property left to a default
            value = getattr(rules, field.name)
            allowed = typing.get_args(hints[field.name]) or (hints[field.name],)
            if field.name == "next_attempt":
                assert value in (None, "retry", "recover"), rules
            elif typing.get_origin(hints[field.name]) is typing.Literal:
                assert value in allowed, (rules.name, field.name)
            else:
                assert isinstance(value, hints[field.name]), (rules.name, field.name)
        assert rules.meaning.strip()


def test_the_sets_are_the_table_read_one_way() -> None:
    by = {name: rules for name, rules in OUTCOMES.items()}
    assert {o for o in ALL if by[o].final} == FINAL_OUTCOMES == outcomes.FINAL_OUTCOMES
    assert {o for o in ALL if by[o].streak == "counts"} == outcomes.FAILURE_OUTCOMES
    assert {o for o in ALL if by[o].streak == "ends"} == outcomes.STREAK_ENDING_OUTCOMES
    assert {o for o in ALL if by[o].streak == "passed"} == outcomes.STREAK_NEUTRAL_OUTCOMES
    # the page's red is wider than the failures by exactly the finished, passed-over ones:
    # work not done that is not held against the task (a shutdown, a missed tick)
    assert outcomes.FAILURE_OUTCOMES <= outcomes.BAD_OUTCOMES
    assert {
        o for o in outcomes.STREAK_NEUTRAL_OUTCOMES if by[o].final
    } == outcomes.BAD_OUTCOMES - outcomes.FAILURE_OUTCOMES


# --- each consumer, by what it does --------------------------------------------------


@pytest.mark.parametrize("outcome", ALL)
def test_a_finish_records_the_final_outcomes_only(outcome: Outcome) -> None:
    make = lambda: FinishRequest("t", 1, False, 1, outcome, None, holder="h#1")  # noqa: E731
    if OUTCOMES[outcome].final:
        assert make().outcome == outcome
    else:
        with pytest.raises(ValueError):
            make()


@pytest.mark.parametrize("outcome", ALL)
def test_the_failure_streak_reads_the_streak_property(outcome: Outcome) -> None:
    # newest first: this outcome, then one failure that a success before it would hide
    count, _ = failure_streak([outcome, "failed"], read_all=True)
    expected = {"counts": 2, "passed": 1, "ends": 0}[OUTCOMES[outcome].streak]
    assert count == expected


@pytest.mark.parametrize("outcome", ALL)
def test_the_page_shows_the_bad_outcomes_red(outcome: Outcome) -> None:
    assert (outcome_class(outcome) == "o-bad") == OUTCOMES[outcome].bad


@pytest.mark.parametrize("outcome", ALL)
def test_the_retry_policy_reads_the_next_attempt_property(outcome: Outcome) -> None:
    task = Task.declare(job, every="1m", retries=1, recover=True)
    candidate = AttemptCandidate(
        name="job",
        slot=slot_of(FIRE),
        manual=False,
        fence=7,
        attempt=1,
        outcome=outcome,
        finished_at=FIRE.timestamp() + 1.0,
        expires_at=FIRE.timestamp() + 0.5,  # expired: a recovery may follow
        db_now=FIRE.timestamp() + 1.0,
    )
    planned = plan(candidate, task)
    assert (planned.why if planned else None) == OUTCOMES[outcome].next_attempt


def test_the_metrics_declare_at_zero_the_outcomes_the_table_says(tmp_path: Path) -> None:
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'never-opened.db'}")
    try:
        scheduler.add_task(job, every="1m", retries=1)
        registry = CollectorRegistry()
        metrics = instrument(scheduler, registry)
        try:
            for metric in ("cronlease_runs_total", "cronlease_later_attempts_total"):
                declared = {
                    sample.labels["outcome"]
                    for family in registry.collect()
                    for sample in family.samples
                    if sample.name == metric
                }
                assert declared == {o for o in ALL if OUTCOMES[o].metric_at_zero}, metric
        finally:
            metrics.close()
    finally:
        scheduler.store.dispose()


def test_the_statements_filter_outcomes_by_the_tables_sets() -> None:
    # ``runs.c.outcome.in_(X)`` anywhere in the package: X is one of the table's sets, and
    # the attempt candidates read the same two the policy does
    used = set()
    for path in sorted((ROOT / "cronlease").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "in_"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "outcome"
            ):
                (argument,) = node.args
                assert isinstance(argument, ast.Name), f"{path}:{node.lineno}"
                assert argument.id in outcomes.__all__, f"{path}:{node.lineno}"
                used.add(argument.id)
    assert {"RETRYABLE_OUTCOMES", "RECOVERABLE_OUTCOMES"} <= used


def test_no_module_keeps_a_list_of_outcomes_of_its_own() -> None:
    """A literal collection of two or more outcome names outside the table is a
    classification kept by hand: it is to be a property in the table instead."""
    names = set(ALL)
    found = []
    for path in sorted((ROOT / "cronlease").rglob("*.py")):
        if path.name == "outcomes.py" and path.parent.name == "_lease":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and len(node.elts) >= 2:
                values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
                if len(values) == len(node.elts) and set(values) <= names:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {values}")
    assert not found, "\n".join(found)
