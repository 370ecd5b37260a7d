"""The SQL text of the MySQL/MariaDB lease transactions (see mysql.py for the design).

Each transaction is a list of statements that are run either one request
each, or joined into one multi-statement request (mysql_script.py): the same
text either way, so the path MySQL takes is the path tested here on MariaDB.
"""

from __future__ import annotations

from typing import NamedTuple

from cronlease._lease.schema import leases, runs

__all__ = [
    "ACQUIRE_COLUMNS",
    "FINISH_COLUMNS",
    "NOW_SQL",
    "Acquisition",
    "Finishing",
    "Renewal",
    "acquisition",
    "finishing",
    "renewal",
]

# Epoch seconds with microseconds. UTC_TIMESTAMP(6) ignores the session time
# zone and, like NOW(), is fixed for the whole statement.
NOW_SQL = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1e6)"
# Names and holders compare byte for byte, as the tables' utf8mb4_bin columns do.
BIN_SQL = "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
_L = leases.name
_R = runs.name

# --- the rows of a transaction ---------------------------------------------------

#: (column, JSON_TABLE type) of an acquisition's rows
ACQUIRE_COLUMNS = (
    ("name", BIN_SQL),
    ("holder", BIN_SQL),
    ("slot", "BIGINT"),
    ("run_slot", "BIGINT"),
    ("ttl", "DOUBLE"),
    ("tolerance", "DOUBLE"),
    ("fingerprint", "VARCHAR(200)"),
)
FINISH_COLUMNS = (
    ("name", BIN_SQL),
    ("slot", "BIGINT"),
    ("manual", "INT"),
    ("fence", "BIGINT"),
    ("outcome", "VARCHAR(16)"),
    ("error", "VARCHAR(2000)"),
    ("rel", "INT"),
    ("holder", BIN_SQL),
)
HEARTBEAT_COLUMNS = (
    ("name", BIN_SQL),
    ("fence", "BIGINT"),
    ("holder", BIN_SQL),
    ("ttl", "DOUBLE"),
)


class _Rows:
    """How a transaction's statements read its rows.

    Many rows are the table ``b``, a ``JSON_TABLE`` over one JSON array
    parameter, joined to the lease and run rows. A batch of one — every lone
    tick, catch-up and run-now — reads scalar parameters instead, and its
    statements find their rows by key: a derived or JSON table costs each
    statement of the transaction ~50 µs more (materialized, sorted). The
    statements are the same otherwise; :func:`acquisition` and
    :func:`finishing` write each once, for both.
    """

    def __init__(self, columns: tuple[tuple[str, str], ...], *, one: bool) -> None:
        self.one = one
        paths = ", ".join(f"{c} {t} PATH '$.{c}'" for c, t in columns)
        self.table = f"JSON_TABLE(:b_batch, '$[*]' COLUMNS ({paths})) AS b"

    def __call__(self, column: str) -> str:
        """A column of the row being written."""
        return f":b_{column}" if self.one else f"b.{column}"


# --- acquisition -----------------------------------------------------------------

# VALUES(col) is each row's proposed value (deprecated by MySQL 8.0.20+, which
# still runs it; MariaDB has no other form). The first assignment takes the row
# for this attempt's nonce only if the lease is free; every later one tests
# holder = nonce, because MySQL evaluates assignments left to right and each sees
# the ones before it (docs/design.md §3.6). A manual request carries slot -1: no
# future gate, no older-slot condition, and the row keeps its slot cursor.
_OURS = f"{_L}.holder = VALUES(holder)"
_FREE = (
    f"{_L}.expires_at < {NOW_SQL} AND NOT {_L}.paused "
    f"AND (VALUES(slot) < 0 OR {_L}.slot < VALUES(slot))"
)
# The row as the attempt left it; the caller compares holders with its nonces.
_OUTCOME_COLUMNS = f"name, holder, fence, slot, expires_at, paused, {NOW_SQL} AS db_now"


def _if_ours(column: str) -> str:
    return f"{column} = CASE WHEN {_OURS} THEN VALUES({column}) ELSE {_L}.{column} END"


class Acquisition(NamedTuple):
    """The statements of one acquisition transaction."""

    upsert: str
    upsert_returning: str
    outcomes: str
    abandon_won: str
    record_won: str


def acquisition(*, one: bool) -> Acquisition:
    """For a batch of one row (scalar parameters) or of many (JSON rows, name order).

    A winner's sweep of older runs and its own run row find the lease row by
    the nonce, so a loser's change nothing and a winner's need no fence from
    the client: the whole acquisition goes to the server before any result is
    read. The lease row is read first: for a loser the statement ends there.
    """
    b = _Rows(ACQUIRE_COLUMNS, one=one)
    source = "DUAL" if one else f"{b.table}"
    order = "" if one else "\n ORDER BY b.name"
    upsert = f"""
INSERT INTO {_L} (name, holder, fence, slot, acquired_at, expires_at, paused, fingerprint)
SELECT {b("name")}, {b("holder")}, 1, {b("slot")}, {NOW_SQL}, {NOW_SQL} + {b("ttl")}, false,
       {b("fingerprint")}
  FROM {source}
 WHERE {b("slot")} < 0 OR {b("slot")} / 1000.0 <= {NOW_SQL} + {b("tolerance")}{order}
ON DUPLICATE KEY UPDATE
    holder = CASE WHEN {_FREE} THEN VALUES(holder) ELSE {_L}.holder END,
    fence = CASE WHEN {_OURS} THEN {_L}.fence + 1 ELSE {_L}.fence END,
    slot = CASE WHEN {_OURS} AND VALUES(slot) >= 0 THEN VALUES(slot) ELSE {_L}.slot END,
    {_if_ours("acquired_at")},
    {_if_ours("expires_at")},
    {_if_ours("fingerprint")}"""
    if one:
        leases_of_batch = f"{_L} l WHERE l.name = :b_name"
        won = f"{_L} l WHERE l.name = :b_name AND l.holder = :b_holder"
        abandon_from = f"{_L} l"
        abandon_where = "l.name = :b_name AND l.holder = :b_holder AND r.name = :b_name AND "
    else:
        leases_of_batch = f"{b.table} STRAIGHT_JOIN {_L} l ON l.name = b.name"
        won = f"{b.table} STRAIGHT_JOIN {_L} l ON l.name = b.name AND l.holder = b.holder"
        abandon_from, abandon_where = won, ""
    return Acquisition(
        upsert=upsert,
        # MariaDB >= 10.5: each row as this attempt left it; a row the future gate
        # kept out inserts and updates nothing, and so returns nothing
        upsert_returning=f"{upsert}\nRETURNING {_OUTCOME_COLUMNS}",
        # read back under the row locks the upsert took (no RETURNING, or rows missing)
        outcomes=f"""
SELECT l.name, l.holder, l.fence, l.slot, l.expires_at, l.paused, {NOW_SQL} AS db_now
  FROM {leases_of_batch}
""",
        abandon_won=f"""
UPDATE {abandon_from} STRAIGHT_JOIN {_R} r ON r.name = l.name
   SET r.outcome = 'abandoned', r.error = :b_abandoned
 WHERE {abandon_where}r.outcome = 'running' AND (r.fence < l.fence OR r.holder <> l.holder)
""",
        record_won=f"""
INSERT INTO {_R} (name, slot, manual, fence, holder, scheduled_for, started_at, outcome)
SELECT l.name, {b("run_slot")}, {b("slot")} < 0, l.fence, l.holder, {b("run_slot")} / 1000.0,
       l.acquired_at, 'running'
  FROM {won}{"" if one else " ORDER BY l.name"}
""",
    )


# --- finishing -------------------------------------------------------------------


class Finishing(NamedTuple):
    """The statements of one finishing transaction: lease rows first, as in
    acquisition, since a late finish that locked its run row first could deadlock
    with a winner that is abandoning that run."""

    release: str
    finish_runs: str


def finishing(*, one: bool) -> Finishing:
    b = _Rows(FINISH_COLUMNS, one=one)
    if one:
        leases_of_batch, runs_of_batch = f"{_L} l", f"{_R} r"
        lease_is_ours = "l.name = :b_name AND "
        run_is_ours = "r.name = :b_name AND r.slot = :b_slot AND r.manual = (:b_manual = 1) AND "
    else:
        leases_of_batch = f"{b.table} STRAIGHT_JOIN {_L} l ON l.name = b.name"
        runs_of_batch = (
            f"{b.table} STRAIGHT_JOIN {_R} r"
            " ON r.name = b.name AND r.slot = b.slot AND r.manual = (b.manual = 1)"
        )
        lease_is_ours = run_is_ours = ""
    return Finishing(
        release=f"""
UPDATE {leases_of_batch}
   SET l.expires_at = {NOW_SQL} - 0.001
 WHERE {lease_is_ours}{b("rel")} = 1 AND l.fence = {b("fence")} AND l.holder = {b("holder")}
""",
        finish_runs=f"""
UPDATE {runs_of_batch}
   SET r.outcome = CASE WHEN r.outcome = 'abandoned' THEN 'lost' ELSE {b("outcome")} END,
       r.finished_at = {NOW_SQL}, r.error = {b("error")}
 WHERE {run_is_ours}r.fence = {b("fence")} AND r.holder = {b("holder")}
   AND r.outcome IN ('running', 'abandoned')
""",
    )


# --- renewal ---------------------------------------------------------------------


class Renewal(NamedTuple):
    """The statements of one renewal transaction: extend the leases still ours (fence
    and holder), in name order, then read which those were (MySQL's UPDATE returns
    no rows; the row locks the update took hold until the commit)."""

    renew: str
    renewed: str


def renewal(*, one: bool) -> Renewal:
    b = _Rows(HEARTBEAT_COLUMNS, one=one)
    if one:
        leases_of_batch = f"{_L} l"
        lease_is_ours = "l.name = :b_name AND "
    else:
        leases_of_batch = f"{b.table} STRAIGHT_JOIN {_L} l ON l.name = b.name"
        lease_is_ours = ""
    ours = f"{lease_is_ours}l.fence = {b('fence')} AND l.holder = {b('holder')}"
    return Renewal(
        renew=f"""
UPDATE {leases_of_batch}
   SET l.expires_at = {NOW_SQL} + {b("ttl")}
 WHERE {ours}
""",
        renewed=f"""
SELECT l.name FROM {leases_of_batch}
 WHERE {ours}
""",
    )
