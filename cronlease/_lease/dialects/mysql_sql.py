"""The SQL text of the MySQL/MariaDB lease transactions (see mysql.py for the design).

Each transaction is a list of statements that are run either one request
each, or joined into one multi-statement request (mysql_script.py): the same
text either way, so the path MySQL takes is the path tested here on MariaDB.
"""

from __future__ import annotations

from cronlease._lease.schema import leases, runs

__all__ = [
    "ABANDON_OURS",
    "ABANDON_WON",
    "ACQUIRE_MANY",
    "FINISH_RUNS_MANY",
    "NOW_SQL",
    "OUTCOME",
    "OUTCOMES_MANY",
    "READ_STATE",
    "RECORD_OURS",
    "RECORD_WON",
    "RELEASE_MANY",
    "upsert",
]

# Epoch seconds with microseconds. UTC_TIMESTAMP(6) ignores the session time
# zone and, like NOW(), is fixed for the whole statement.
NOW_SQL = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1e6)"
# Names and holders compare byte for byte, as the tables' utf8mb4_bin columns do.
BIN_SQL = "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
_L = leases.name
_R = runs.name

# --- one task ------------------------------------------------------------------

# The row as an attempt left it, and whether it carries the attempt's nonce
# (compared by the database, in the column's collation).
_OUTCOME = f"holder = :b_holder AS won, fence, slot, expires_at, paused, {NOW_SQL} AS db_now"


def upsert(*, manual: bool, returning: bool = False) -> str:
    """The acquisition upsert; it changes the row only if the lease was free for this slot.

    A scheduled acquisition needs the lease expired, the slot newer than the
    row's and not from the future, and the task not paused. A manual one (run
    now) needs only expiry and no pause, and leaves the slot cursor as it is
    (-1 for a task that never ran, so its first scheduled tick still runs).
    ``returning`` (MariaDB) sends back the row as this attempt left it; a slot
    from the future inserts and updates nothing, and so returns nothing.
    """
    free = f"{_L}.expires_at < {NOW_SQL} AND NOT {_L}.paused"
    if not manual:
        free += f" AND {_L}.slot < :b_slot"

    def ours(column: str, value: str) -> str:
        return f"{column} = CASE WHEN {_L}.holder = :b_holder THEN {value} ELSE {_L}.{column} END"

    assignments = ",\n    ".join(
        [
            f"holder = CASE WHEN {free} THEN :b_holder ELSE {_L}.holder END",
            ours("fence", f"{_L}.fence + 1"),
            *([] if manual else [ours("slot", ":b_slot")]),
            ours("acquired_at", NOW_SQL),
            ours("expires_at", f"{NOW_SQL} + :b_ttl"),
            ours("fingerprint", ":b_fingerprint"),
        ]
    )
    slot = "-1" if manual else ":b_slot"
    gate = "" if manual else f"\n WHERE :b_slot / 1000.0 <= {NOW_SQL} + :b_tolerance"
    tail = f"\nRETURNING {_OUTCOME}" if returning else ""
    return f"""
INSERT INTO {_L} (name, holder, fence, slot, acquired_at, expires_at, paused, fingerprint)
SELECT :b_name, :b_holder, 1, {slot}, {NOW_SQL}, {NOW_SQL} + :b_ttl, false, :b_fingerprint
  FROM DUAL{gate}
ON DUPLICATE KEY UPDATE
    {assignments}{tail}
"""


# Read back under the row lock the upsert took (where there is no RETURNING).
OUTCOME = f"SELECT {_OUTCOME} FROM {_L} WHERE name = :b_name"
# A winner's sweep of older runs and its own run row. Both find the lease row
# by the nonce, so a loser's change nothing, and a winner's need no fence
# from the client: the whole acquisition can be sent before any result is read.
# The lease row is read first (a constant, by its key): for a loser the
# statement ends there and reads no run rows.
ABANDON_OURS = f"""
UPDATE {_L} l STRAIGHT_JOIN {_R} r ON r.name = l.name
   SET r.outcome = 'abandoned', r.error = :b_abandoned
 WHERE l.name = :b_name AND l.holder = :b_holder AND r.name = :b_name
   AND r.outcome = 'running' AND r.fence < l.fence
"""
RECORD_OURS = f"""
INSERT INTO {_R} (name, slot, manual, fence, holder, scheduled_for, started_at, outcome)
SELECT l.name, :b_run_slot, :b_manual, l.fence, l.holder, :b_scheduled_for, l.acquired_at,
       'running'
  FROM {_L} l WHERE l.name = :b_name AND l.holder = :b_holder
"""
READ_STATE = f"SELECT slot, expires_at, paused, {NOW_SQL} AS db_now FROM {_L} WHERE name = :b_name"

# --- batches ---------------------------------------------------------------------


def _json_table(columns: str) -> str:
    return f"JSON_TABLE(:b_batch, '$[*]' COLUMNS ({columns})) AS b"


_ACQUIRE_ROWS = _json_table(
    f"name {BIN_SQL} PATH '$.name', holder {BIN_SQL} PATH '$.holder', "
    "slot BIGINT PATH '$.slot', ttl DOUBLE PATH '$.ttl', tolerance DOUBLE PATH '$.tolerance', "
    "fingerprint VARCHAR(200) PATH '$.fingerprint', scheduled_for DOUBLE PATH '$.scheduled_for'"
)
# The upsert above over every row of the batch, in name order; VALUES(col) is
# each row's proposed value (deprecated by MySQL 8.0.20+, which still runs it;
# MariaDB has no other form).
_OURS = f"{_L}.holder = VALUES(holder)"


def _if_ours(column: str) -> str:
    return f"{column} = CASE WHEN {_OURS} THEN VALUES({column}) ELSE {_L}.{column} END"


ACQUIRE_MANY = f"""
INSERT INTO {_L} (name, holder, fence, slot, acquired_at, expires_at, paused, fingerprint)
SELECT b.name, b.holder, 1, b.slot, {NOW_SQL}, {NOW_SQL} + b.ttl, false, b.fingerprint
  FROM {_ACQUIRE_ROWS}
 WHERE b.slot / 1000.0 <= {NOW_SQL} + b.tolerance
 ORDER BY b.name
ON DUPLICATE KEY UPDATE
    holder = CASE WHEN {_L}.expires_at < {NOW_SQL} AND NOT {_L}.paused
                       AND {_L}.slot < VALUES(slot)
                  THEN VALUES(holder) ELSE {_L}.holder END,
    fence = CASE WHEN {_OURS} THEN {_L}.fence + 1 ELSE {_L}.fence END,
    {_if_ours("slot")},
    {_if_ours("acquired_at")},
    {_if_ours("expires_at")},
    {_if_ours("fingerprint")}
"""
# Read back under the row locks the upsert took; the caller compares holders with nonces.
OUTCOMES_MANY = f"""
SELECT l.name, l.holder, l.fence, l.slot, l.expires_at, l.paused, {NOW_SQL} AS db_now
  FROM {_ACQUIRE_ROWS} STRAIGHT_JOIN {_L} l ON l.name = b.name
"""
# The winners' sweeps and run rows, found by their nonces (see ABANDON_OURS).
_WON = f"STRAIGHT_JOIN {_L} l ON l.name = b.name AND l.holder = b.holder"
ABANDON_WON = f"""
UPDATE {_ACQUIRE_ROWS} {_WON} STRAIGHT_JOIN {_R} r ON r.name = b.name
   SET r.outcome = 'abandoned', r.error = :b_abandoned
 WHERE r.outcome = 'running' AND r.fence < l.fence
"""
RECORD_WON = f"""
INSERT INTO {_R} (name, slot, manual, fence, holder, scheduled_for, started_at, outcome)
SELECT b.name, b.slot, false, l.fence, l.holder, b.scheduled_for, l.acquired_at, 'running'
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
RELEASE_MANY = f"""
UPDATE {_FINISH_ROWS} STRAIGHT_JOIN {_L} l ON l.name = b.name
   SET l.expires_at = {NOW_SQL} - 0.001
 WHERE b.rel = 1 AND l.fence = b.fence
"""
FINISH_RUNS_MANY = f"""
UPDATE {_FINISH_ROWS} STRAIGHT_JOIN {_R} r
    ON r.name = b.name AND r.slot = b.slot AND r.manual = (b.manual = 1)
   SET r.outcome = CASE WHEN r.outcome = 'abandoned' THEN 'lost' ELSE b.outcome END,
       r.finished_at = {NOW_SQL}, r.error = b.error
 WHERE r.fence = b.fence AND r.outcome IN ('running', 'abandoned')
"""
