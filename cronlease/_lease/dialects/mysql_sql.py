"""The SQL text of the MySQL/MariaDB lease transactions (see mysql.py for the design).

Each transaction is a list of statements that are run either one request
each, or joined into one multi-statement request (mysql_script.py): the same
text either way, so the path MySQL takes is the path tested here on MariaDB.
"""

from __future__ import annotations

from cronlease._lease.schema import leases, runs

__all__ = [
    "ABANDON_WON",
    "FINISH_RUNS",
    "NOW_SQL",
    "OUTCOMES",
    "RECORD_WON",
    "RELEASE",
    "acquire",
]

# Epoch seconds with microseconds. UTC_TIMESTAMP(6) ignores the session time
# zone and, like NOW(), is fixed for the whole statement.
NOW_SQL = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1e6)"
# Names and holders compare byte for byte, as the tables' utf8mb4_bin columns do.
BIN_SQL = "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
_L = leases.name
_R = runs.name

# --- acquisition -----------------------------------------------------------------


def _json_table(columns: str) -> str:
    return f"JSON_TABLE(:b_batch, '$[*]' COLUMNS ({columns})) AS b"


_ACQUIRE_ROWS = _json_table(
    f"name {BIN_SQL} PATH '$.name', holder {BIN_SQL} PATH '$.holder', "
    "slot BIGINT PATH '$.slot', run_slot BIGINT PATH '$.run_slot', "
    "ttl DOUBLE PATH '$.ttl', tolerance DOUBLE PATH '$.tolerance', "
    "fingerprint VARCHAR(200) PATH '$.fingerprint', scheduled_for DOUBLE PATH '$.scheduled_for'"
)
# VALUES(col) is each row's proposed value (deprecated by MySQL 8.0.20+, which
# still runs it; MariaDB has no other form). The first assignment takes the row
# for this attempt's nonce only if the lease is free; every later one tests
# holder = nonce, because MySQL evaluates assignments left to right and each sees
# the ones before it (docs/design.md §3). A manual request carries slot -1: no
# future gate, no older-slot condition, and the row keeps its slot cursor.
_OURS = f"{_L}.holder = VALUES(holder)"
_FREE = (
    f"{_L}.expires_at < {NOW_SQL} AND NOT {_L}.paused "
    f"AND (VALUES(slot) < 0 OR {_L}.slot < VALUES(slot))"
)


def _if_ours(column: str) -> str:
    return f"{column} = CASE WHEN {_OURS} THEN VALUES({column}) ELSE {_L}.{column} END"


# The row as the attempt left it; the caller compares holders with its nonces.
_OUTCOME_COLUMNS = f"name, holder, fence, slot, expires_at, paused, {NOW_SQL} AS db_now"


def acquire(*, returning: bool) -> str:
    """The acquisition upsert over every row of the batch, in name order.

    ``returning`` (MariaDB >= 10.5) sends back each row as this attempt left it;
    a row the future gate kept out inserts and updates nothing, and so returns
    nothing.
    """
    tail = f"\nRETURNING {_OUTCOME_COLUMNS}" if returning else ""
    return f"""
INSERT INTO {_L} (name, holder, fence, slot, acquired_at, expires_at, paused, fingerprint)
SELECT b.name, b.holder, 1, b.slot, {NOW_SQL}, {NOW_SQL} + b.ttl, false, b.fingerprint
  FROM {_ACQUIRE_ROWS}
 WHERE b.slot < 0 OR b.slot / 1000.0 <= {NOW_SQL} + b.tolerance
 ORDER BY b.name
ON DUPLICATE KEY UPDATE
    holder = CASE WHEN {_FREE} THEN VALUES(holder) ELSE {_L}.holder END,
    fence = CASE WHEN {_OURS} THEN {_L}.fence + 1 ELSE {_L}.fence END,
    slot = CASE WHEN {_OURS} AND VALUES(slot) >= 0 THEN VALUES(slot) ELSE {_L}.slot END,
    {_if_ours("acquired_at")},
    {_if_ours("expires_at")},
    {_if_ours("fingerprint")}{tail}
"""


# Read back under the row locks the upsert took (where there is no RETURNING, and
# for the rows RETURNING left out).
OUTCOMES = f"""
SELECT l.name, l.holder, l.fence, l.slot, l.expires_at, l.paused, {NOW_SQL} AS db_now
  FROM {_ACQUIRE_ROWS} STRAIGHT_JOIN {_L} l ON l.name = b.name
"""
# A winner's sweep of older runs and its own run row, found by the nonce, so a
# loser's change nothing and a winner's need no fence from the client: the whole
# acquisition goes to the server before any result is read. The lease row is
# read first: for a loser the statement ends there and reads no run rows.
_WON = f"STRAIGHT_JOIN {_L} l ON l.name = b.name AND l.holder = b.holder"
ABANDON_WON = f"""
UPDATE {_ACQUIRE_ROWS} {_WON} STRAIGHT_JOIN {_R} r ON r.name = b.name
   SET r.outcome = 'abandoned', r.error = :b_abandoned
 WHERE r.outcome = 'running' AND r.fence < l.fence
"""
RECORD_WON = f"""
INSERT INTO {_R} (name, slot, manual, fence, holder, scheduled_for, started_at, outcome)
SELECT b.name, b.run_slot, b.slot < 0, l.fence, l.holder, b.scheduled_for, l.acquired_at,
       'running'
  FROM {_ACQUIRE_ROWS} {_WON}
 ORDER BY b.name
"""

# --- finishing -------------------------------------------------------------------

_FINISH_ROWS = _json_table(
    f"name {BIN_SQL} PATH '$.name', slot BIGINT PATH '$.slot', manual INT PATH '$.manual', "
    "fence BIGINT PATH '$.fence', outcome VARCHAR(16) PATH '$.outcome', "
    "error VARCHAR(2000) PATH '$.error', rel INT PATH '$.release'"
)
# The lease rows first, as in acquire: a late finish that locked its run row
# first could deadlock with a winner that is abandoning that run.
RELEASE = f"""
UPDATE {_FINISH_ROWS} STRAIGHT_JOIN {_L} l ON l.name = b.name
   SET l.expires_at = {NOW_SQL} - 0.001
 WHERE b.rel = 1 AND l.fence = b.fence
"""
FINISH_RUNS = f"""
UPDATE {_FINISH_ROWS} STRAIGHT_JOIN {_R} r
    ON r.name = b.name AND r.slot = b.slot AND r.manual = (b.manual = 1)
   SET r.outcome = CASE WHEN r.outcome = 'abandoned' THEN 'lost' ELSE b.outcome END,
       r.finished_at = {NOW_SQL}, r.error = b.error
 WHERE r.fence = b.fence AND r.outcome IN ('running', 'abandoned')
"""
