"""The SPIN model of the lease protocol (spec/lease.pml; docs/design.md, "What the
model checks"): the unmutated model verifies, each mutation is caught with a
readable counterexample, and the guards the model declares are the guards of the
PostgreSQL statements.

Without spin (or gcc) the model tests skip, unless ``CRONLEASE_TEST_REQUIRE``
names spin (CI): then they fail. Each builds in its own tmp_path.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.dialects import postgresql as pg_dialect

from cronlease._lease import recovery
from cronlease._lease.dialects import postgresql as pg
from cronlease._lease.dialects.attempts import AttemptStatements
from tests.conftest import REQUIRED
from tests.support import spin_model


@pytest.fixture
def spin() -> None:
    problem = spin_model.available()
    if problem is None:
        return
    if "spin" in REQUIRED:
        pytest.fail(f"SPIN model check: {problem} (CRONLEASE_TEST_REQUIRE names spin)")
    print(f"SPIN model check skipped: {problem}")
    pytest.skip(f"SPIN model check: {problem}")


@pytest.mark.slow
def test_unmutated_model_verifies(spin: None, tmp_path: Path) -> None:
    result = spin_model.check(tmp_path)
    print(f"{result.states} states, {result.memory_mb:.0f} MB, {result.seconds:.1f} s")
    assert result.errors == 0, result.story()
    assert result.complete, result.output
    assert result.states > 100_000  # the search went somewhere


@pytest.mark.slow
def test_lost_writes_weaker_properties_hold(spin: None, tmp_path: Path) -> None:
    """With a failover to a standby that missed commits, checked to the end: a stale
    holder never writes over the new one (P3), a replica never starts a (slot,
    attempt) twice (P1w) and its fences increase (P4w) — retries and the watcher left
    out; with them P1w and P4w fail (test_lost_writes_findings)."""
    defines = ("-DLOST_WRITES", "-DNO_ATTEMPTS")
    result = spin_model.check(tmp_path, defines)
    print(f"{result.states} states, {result.memory_mb:.0f} MB, {result.seconds:.1f} s")
    assert result.errors == 0, result.story()
    assert result.complete, result.output


#: P2 across the failover, for a living holder (docs/design.md §10.2): checked to the end
LIVING_HOLDER = ("-DLOST_WRITES", "-DNO_ATTEMPTS", "-DP2_LOST")


@pytest.mark.slow
def test_lost_writes_no_overlap_while_the_holder_lives(spin: None, tmp_path: Path) -> None:
    """With a failover to a standby that missed commits, checked to the end: no run
    starts beside a run whose replica was not told it lost its lease (ctx.lost), unless
    the starting replica had not seen that run's lease (fence and nonce) when it won, or
    the failover lost that lease's renewals (the row showed it expired early): the
    holder re-asserts its lease and a replica that saw it held gives its win back.
    P1w, P3, P4w hold in the same search. Retries and the watcher left out."""
    result = spin_model.check(tmp_path, LIVING_HOLDER)
    print(f"{result.states} states, {result.memory_mb:.0f} MB, {result.seconds:.1f} s")
    assert result.errors == 0, result.story()
    assert result.complete, result.output
    assert result.states > 1_000_000


@pytest.mark.slow
def test_a_win_not_given_back_overlaps_the_living_holder(spin: None, tmp_path: Path) -> None:
    """NO_GIVE_BACK: a win revealing lost writes, while the lease seen may still be held,
    renumbered and run as before the give-back: it starts beside the holder it saw.
    Depth-first: breadth-first searches most of the space first."""
    result = spin_model.check(tmp_path, (*LIVING_HOLDER, "-DNO_GIVE_BACK"), optimize="-O0")
    print(result.story())
    assert result.violated == "P2_no_overlap_while_both_unexpired", result.story()
    assert any("failover" in step for step in result.steps), result.story()
    assert any(" refences " in step for step in result.steps), result.story()


@pytest.mark.slow
def test_run_now_model_verifies(spin: None, tmp_path: Path) -> None:
    """A manual run (run_now: slot -1, no future gate, no cursor, the row's cursor kept,
    its own run row; the nonce check without the slot) besides the ticks of one slot:
    every safety property holds, to a horizon of 5 ticks (a takeover of slot 1's lease
    fits). Two slots with a manual run do not fit CI's budget."""
    result = spin_model.check(tmp_path, ("-DRUN_NOW", "-DNS=1", "-DMAXT=5"), optimize="-O0")
    print(f"{result.states} states, {result.memory_mb:.0f} MB, {result.seconds:.1f} s")
    assert result.errors == 0, result.story()
    assert result.complete, result.output
    assert result.states > 100_000


@pytest.mark.slow
def test_run_now_without_expiry_is_caught(spin: None, tmp_path: Path) -> None:
    """The manual acquisition's conflict clause without ``l.expires_at < now``: a manual
    run starts beside a scheduled one."""
    defines = ("-DRUN_NOW", "-DNS=1", "-DMAXT=5", "-DNO_MANUAL_EXPIRY")
    result = spin_model.check(tmp_path, defines, breadth_first=True, optimize="-O0")
    print(result.story())
    assert result.violated == "P2_no_overlap_while_both_unexpired", result.story()
    assert any("manual run" in step for step in result.steps), result.story()


# Each mutation removes one guard; the property its counterexample breaks.
MUTATIONS = {
    "NO_EXPIRY": "P2_no_overlap_while_both_unexpired",
    "NO_REACQUIRE_EXPIRY": "P2_no_overlap_while_both_unexpired",
    "NO_HB_FENCE": "P3_stale_holder_cannot_write",
    "NO_NONCE_CHECK": "P1_one_start_per_slot_attempt",
    "NO_SLOT_CURSOR": "P1_one_start_per_slot_attempt",
    "NO_REASSERT_FENCE": "P3_stale_holder_cannot_write",
}
# What SPIN found with lost writes (docs/design.md): a replica may run a (slot, attempt)
# twice; and, before the renumbering matched the nonce alone (REFENCE_FENCE_MATCH), it
# could hand a fence out twice.
LOST_WRITE_FINDINGS = {
    ("-DLOST_WRITES",): "P1w_one_start_per_replica",
    ("-DLOST_WRITES", "-DREFENCE_FENCE_MATCH", "-DWAIVE_P1W"): "P4w_own_fences_increase",
}


@pytest.mark.slow
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_mutation_is_caught(spin: None, tmp_path: Path, mutation: str) -> None:
    result = spin_model.check(tmp_path, (f"-D{mutation}",), breadth_first=True, optimize="-O0")
    print(result.story())
    assert result.errors, f"{mutation}: no counterexample\n{result.output}"
    assert result.violated == MUTATIONS[mutation], result.story()
    assert any(" starts slot " in step for step in result.steps), result.story()


@pytest.mark.slow
def test_holder_match_is_what_survives_lost_writes(spin: None, tmp_path: Path) -> None:
    """Fenced writes matching the fence alone: a fence issued again after a failover
    lets a stale holder write over the new one."""
    result = spin_model.check(
        tmp_path,
        ("-DLOST_WRITES", "-DNO_HOLDER_MATCH", "-DNO_ATTEMPTS"),
        breadth_first=True,
        optimize="-O0",
    )
    print(result.story())
    assert result.violated == "P3_stale_holder_cannot_write", result.story()
    assert any("failover" in step for step in result.steps), result.story()


@pytest.mark.slow
@pytest.mark.parametrize("defines", sorted(LOST_WRITE_FINDINGS))
def test_lost_writes_findings(spin: None, tmp_path: Path, defines: tuple[str, ...]) -> None:
    """What SPIN found of the real protocol: see docs/design.md, "What the model checks".
    Depth-first: breadth-first would search most of the space before the first one."""
    result = spin_model.check(tmp_path, defines, optimize="-O0")
    print(result.story())
    assert result.violated == LOST_WRITE_FINDINGS[defines], result.story()
    assert any("failover" in step for step in result.steps), result.story()


# --- progress: liveness under weak fairness, the watcher's bound ------------------


@pytest.mark.slow
def test_every_due_tick_is_decided_and_dead_runs_are_marked(spin: None, tmp_path: Path) -> None:
    """L1 (an ltl claim): every due tick is run or skipped with a reason by R0, the
    replica that stays up, whatever R1 does; and in the same search P6: a run whose
    replica crashed is marked by the watcher, which passes every tick, within a tick of
    its lease's expiry. Acceptance cycles are searched without fairness: none at all
    means none under weak fairness either (every step is finite; the clock stops)."""
    result = spin_model.liveness(tmp_path)
    print(f"{result.states} states, {result.memory_mb:.0f} MB, {result.seconds:.1f} s")
    assert result.errors == 0, result.story()
    assert result.complete, result.output
    assert "acceptance   cycles \t+" in result.output, result.output


# Each breaks progress; the property its counterexample breaks (an acceptance cycle of
# L1, or P6's bounded response).
PROGRESS_MUTATIONS = {
    "NO_GIVE_UP": "L1_every_due_tick_decided",
    "NO_WATCHER_EXPIRY": "P6_watcher_marks_dead_runs_in_bound",
}


@pytest.mark.slow
@pytest.mark.parametrize("mutation", sorted(PROGRESS_MUTATIONS))
def test_progress_mutation_is_caught(spin: None, tmp_path: Path, mutation: str) -> None:
    result = spin_model.liveness(tmp_path, (f"-D{mutation}",), optimize="-O0")
    print(result.story())
    assert result.errors, f"{mutation}: no counterexample\n{result.output}"
    assert result.violated == PROGRESS_MUTATIONS[mutation], result.story()


# --- the model's guards are the statements' ---------------------------------------

_NOW = pg.NOW_SQL
_GUARD = re.compile(r"/\*\s*guard:\s*([\w ]+?):\s*(.*?)\s*\*/")


def _compiled(statement: Any) -> str:
    """PostgreSQL text of a Core statement, bound values of literals inlined."""
    compiled = statement.compile(dialect=pg_dialect.dialect())
    sql = str(compiled)

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith("b_"):
            return f":{name}"
        bound = compiled.params[name]
        if isinstance(bound, list | tuple):
            return "(" + ", ".join(f"'{item}'" for item in bound) + ")"
        return f"'{bound}'"

    sql = re.sub(r"\(__\[POSTCOMPILE_(\w+)\]\)", value, sql)
    return re.sub(r"%\((\w+)\)s(?:::\w+)?", value, sql)


def _normal(sql: str) -> str:
    sql = sql.replace(_NOW, "now").replace("cronlease_leases.", "leases.")
    sql = " ".join(sql.replace("cronlease_runs.", "runs.").split())
    # the lock of the batch's rows in name order: deadlocks, which the model has not
    return sql.replace("(SELECT count(*) FROM locked) >= 0 AND ", "")


def _where(sql: str, index: int = 0) -> str:
    """The ``index``-th WHERE clause of ``sql``, normalized."""
    ends = r"(?=\s+(?:RETURNING|ORDER BY|LIMIT|ON CONFLICT)\b|\n\)|\Z)"
    clauses = re.findall(r"\bWHERE\s+(.*?)" + ends, sql, flags=re.S)
    return _normal(clauses[index])


def _join(sql: str) -> str:
    return _normal(re.search(r"\bJOIN \w+ ON (.*?)\s+WHERE\b", sql, flags=re.S).group(1))


def statement_guards() -> dict[str, str]:
    """Per guard the model declares, the condition the code has (normalized)."""
    attempts = AttemptStatements(pg.STATEMENTS)
    acquire = pg.acquire_statement(pg.batch_rows(pg.ACQUIRE_COLUMNS, one=True)).text
    finish = pg.finish_statement(pg.batch_rows(pg.FINISH_COLUMNS, one=True)).text
    heartbeat = pg.heartbeat_statement(pg.batch_rows(pg.HEARTBEAT_COLUMNS, one=True)).text
    candidates = _compiled(attempts._candidates)
    # the join's name equality is the statement's shape; the model has one task
    join = _join(candidates).replace("runs.name = leases.name AND ", "")
    outcome = re.search(r"AND NOT leases\.paused AND \((.*)\)$", _where(candidates)).group(1)
    source = inspect.getsource(recovery.recover)
    nonce_check = "row.holder == nonce" if "row.holder == nonce" in source else "?"
    slot = "(request.manual or row.slot == request.slot)"
    slot_check = slot if slot in source else "?"
    conflict = _normal(acquire.split("ON CONFLICT")[1].split(" WHERE ", 1)[1]).split(" RETURNING")[
        0
    ]
    # a manual request (slot -1): the conflict clause's first disjunct, the cursor kept
    manual = re.sub(r"\((excluded\.slot < 0) OR [^)]*\)", r"\1", conflict)
    keeps = re.search(r"CASE WHEN excluded\.slot < 0 THEN l\.slot", acquire)
    return {
        "acquire insert": _where(acquire, 0),
        "acquire conflict": conflict,
        "acquire manual conflict": manual,
        "acquire manual slot": keeps.group(0) if keeps else "?",
        "acquire abandoned": _where(acquire, 2),
        "heartbeat": _where(heartbeat, 1),
        "finish run": _where(finish, 1),
        "finish release": _where(finish, 2),
        "reacquire": _where(_compiled(attempts._take)),
        "abandon others": _where(_compiled(attempts._abandon_others)),
        "candidates": join,
        "candidates outcome": outcome,
        "stuck": _where(_compiled(attempts._stuck)),
        "refence": _where(_compiled(pg.STATEMENTS._refence_lease)),
        "raise floor": _where(_compiled(pg.STATEMENTS._raise_floor)),
        "reassert": _where(_compiled(pg.STATEMENTS._reassert)),
        "revive run": _where(_compiled(pg.STATEMENTS._revive_run)),
        "give back": _where(_compiled(pg.STATEMENTS._give_back)),
        "give up run": _where(_compiled(pg.STATEMENTS._give_up_run)),
        "recover": f"{nonce_check} AND {slot_check}",
    }


def model_guards() -> dict[str, str]:
    text = spin_model.MODEL.read_text()
    return {name.strip(): " ".join(cond.split()) for name, cond in _GUARD.findall(text)}


def test_model_guards_are_the_statements_guards() -> None:
    """A guard changed in a statement (or in the model) without the other fails here:
    the model's comments declare each step's guard as the PostgreSQL text has it."""
    assert model_guards() == statement_guards()
