"""The connect gate's backoff after a server refused a connection: doubling from 0.5 s to
15 s, half of it random, reset by a success; during it an attempt fails at once with a
copy of the last error. A server that did not answer is asked again at once."""

from __future__ import annotations

import pytest

from cronlease._lease.pool import BACKOFF_CAP, BACKOFF_FIRST, ConnectGate, server_refused


class Refused(Exception):
    pass


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def refuse() -> object:
    raise Refused('connection to server at "db", port 5432 failed: FATAL:  sorry, too many clients')


def silence() -> object:
    raise Refused('connection to server at "db", port 5432 failed: Connection refused')


@pytest.mark.parametrize("jitter", [0.0, 1.0])
def test_the_backoff_doubles_to_its_cap(jitter: float) -> None:
    clock = Clock()
    gate = ConnectGate(jitter=lambda: jitter, clock=clock)
    waits = []
    for _ in range(8):
        with pytest.raises(Refused):
            gate.connect(refuse)
        state = gate.state()
        assert state is not None
        waits.append(state.retry_in)
        clock.now += state.retry_in
    full = [min(BACKOFF_CAP, BACKOFF_FIRST * 2**n) for n in range(8)]
    assert waits == [wait * (0.5 + jitter / 2) for wait in full]
    assert gate.attempts == 8 and gate.held_back == 0


def test_during_the_backoff_attempts_fail_at_once_with_a_copy_of_the_error() -> None:
    clock = Clock()
    gate = ConnectGate(jitter=lambda: 0.5, clock=clock)
    with pytest.raises(Refused) as first:
        gate.connect(refuse)
    calls: list[int] = []
    for _ in range(3):
        with pytest.raises(Refused) as again:
            gate.connect(lambda: calls.append(1))
        assert again.value is not first.value and str(again.value) == str(first.value)
    assert not calls and gate.attempts == 1 and gate.held_back == 3
    state = gate.state()
    assert state is not None and state.failures == 1 and "too many clients" in state.error
    assert "1 attempt(s) failed" in state.describe()


def test_a_success_ends_the_backoff() -> None:
    clock = Clock()
    gate = ConnectGate(jitter=lambda: 0.0, clock=clock)
    for _ in range(3):
        with pytest.raises(Refused):
            gate.connect(refuse)
        clock.now += 10
    assert gate.connect(lambda: "connection") == "connection"
    assert gate.state() is None
    with pytest.raises(Refused):
        gate.connect(refuse)
    state = gate.state()
    assert state is not None and state.failures == 1 and state.retry_in == BACKOFF_FIRST / 2


def test_a_server_that_did_not_answer_is_asked_again_at_once() -> None:
    clock = Clock()
    gate = ConnectGate(jitter=lambda: 0.5, clock=clock)
    for _ in range(3):
        with pytest.raises(Refused):
            gate.connect(silence)
    assert gate.attempts == 3 and gate.held_back == 0
    state = gate.state()
    assert state is not None and state.failures == 3 and state.retry_in == 0
    with pytest.raises(Refused):  # the server is up and full now: the backoff starts
        gate.connect(refuse)
    state = gate.state()
    assert state is not None and state.failures == 4 and state.retry_in == BACKOFF_FIRST * 0.75


def test_which_failures_are_the_servers_answer() -> None:
    import pymysql

    assert server_refused(pymysql.err.OperationalError(1040, "Too many connections"))
    assert server_refused(pymysql.err.OperationalError(1045, "Access denied"))
    assert not server_refused(pymysql.err.OperationalError(2003, "Can't connect to MySQL"))
    assert server_refused(Exception("failed: FATAL:  remaining connection slots are reserved"))
    assert not server_refused(Exception("failed: timeout expired"))
