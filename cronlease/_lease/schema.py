"""The tables cronlease keeps, as SQLAlchemy Core metadata.

Alembic users can include :data:`metadata` in their ``target_metadata``.
Times are epoch seconds in a double column, always computed by the database
server, so they compare the same way on every backend and keep sub-second
precision.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    true,
)
from sqlalchemy.dialects import mysql

from cronlease._roles import MAX_ROLES_LENGTH
from cronlease._timing.schedule import MAX_FINGERPRINT_LENGTH

__all__ = [
    "MAX_ERROR_LENGTH",
    "MAX_FINGERPRINT_LENGTH",
    "MAX_NAME_LENGTH",
    "RUNS_ATTEMPT_KEY",
    "RUNS_SLOT_KEY",
    "deliveries",
    "jobs",
    "leases",
    "members",
    "metadata",
    "runs",
    "schedule_changes",
    "schedule_heads",
    "schedules",
]

MAX_NAME_LENGTH = 255
MAX_HOLDER_LENGTH = 255
MAX_ERROR_LENGTH = 2000
#: a member's task-set digest (cronlease/_run/acquisition/membership.py): 16 hex digits
MAX_TASK_SET_LENGTH = 32

#: the unique key of run rows: one row per attempt of a slot (issue 13)
RUNS_ATTEMPT_KEY = "cronlease_runs_attempt_key"
#: the key it replaced, (name, slot, manual), in databases made before attempts existed
RUNS_SLOT_KEY = "cronlease_runs_slot_key"

metadata = MetaData()
# Every string column on MySQL: utf8mb4 whatever the server default (latin1 would
# reject non-ASCII names and error text), compared byte for byte.
MYSQL_TABLE_OPTIONS: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"}


def _name_type(length: int = MAX_NAME_LENGTH) -> String:
    # MySQL's default collations are case- and trailing-space-insensitive: two
    # task names differing only in case would share one lease row.
    return String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"),
        "mysql",
        "mariadb",
    )


leases = Table(
    "cronlease_leases",
    metadata,
    Column("name", _name_type(), primary_key=True),
    # holder id plus '#' and a per-attempt nonce
    Column("holder", String(MAX_HOLDER_LENGTH), nullable=False),
    # grows by one on every acquisition; writes by a run are conditional on it
    Column("fence", BigInteger, nullable=False),
    # the last slot acquired (ms since the epoch); -1 for a row made by pause
    Column("slot", BigInteger, nullable=False),
    Column("acquired_at", Double, nullable=False),
    Column("expires_at", Double, nullable=False),
    Column("paused", Boolean, nullable=False, server_default=false()),
    Column("fingerprint", String(MAX_FINGERPRINT_LENGTH), nullable=True),
    **MYSQL_TABLE_OPTIONS,
)

runs = Table(
    "cronlease_runs",
    metadata,
    Column("name", _name_type(), nullable=False),
    Column("slot", BigInteger, nullable=False),
    Column("manual", Boolean, nullable=False, server_default=false()),
    Column("fence", BigInteger, nullable=False),
    Column("holder", String(MAX_HOLDER_LENGTH), nullable=False),
    Column("scheduled_for", Double, nullable=False),
    Column("started_at", Double, nullable=False),
    Column("finished_at", Double, nullable=True),
    # running, succeeded, failed, lost, timed_out, interrupted, abandoned
    Column("outcome", String(16), nullable=False),
    Column("error", String(MAX_ERROR_LENGTH), nullable=True),
    # 1 for the run an acquisition makes; 2, 3, ... for the retries and recoveries of
    # its slot. The server default keeps the batch acquisitions' inserts unchanged.
    Column("attempt", Integer, nullable=False, server_default="1"),
    # The database itself refuses a second run of one attempt of a slot (defence in depth).
    UniqueConstraint("name", "slot", "manual", "attempt", name=RUNS_ATTEMPT_KEY),
    Index("cronlease_runs_started", "name", "started_at"),
    # Every acquisition sweeps the task's runs still 'running' (a dead holder's):
    # without this it would scan the task's whole history.
    Index("cronlease_runs_outcome", "name", "outcome"),
    **MYSQL_TABLE_OPTIONS,
)

# One row per live replica (docs/design.md §4.4): renewed every few seconds on the
# replica's renewal connection, deleted on a clean shutdown, ignored (and deleted
# by the next renewer) once expired. An optimisation of the tick path only: who
# runs a tick is decided by the lease row alone.
members = Table(
    "cronlease_members",
    metadata,
    # the replica's holder id (Scheduler.holder), without a nonce
    Column("holder", _name_type(MAX_HOLDER_LENGTH), primary_key=True),
    Column("namespace", String(MAX_NAME_LENGTH), nullable=False, server_default=""),
    # digest of the replica's declared tasks: replicas rank ticks among those of the same set
    Column("task_set", String(MAX_TASK_SET_LENGTH), nullable=False),
    Column("started_at", Double, nullable=False),
    Column("renewed_at", Double, nullable=False),
    Column("expires_at", Double, nullable=False),
    # the replica's roles, comma-joined (cronlease/_roles.py); added in place to tables of
    # earlier versions (_lease/migration.py), whose replicas write none
    Column("roles", String(MAX_ROLES_LENGTH), nullable=False, server_default=""),
    **MYSQL_TABLE_OPTIONS,
)

# One row per task message a guarded worker task received (cronlease.contrib.celery's
# OnceTask): inserted before the body runs, refused when the id is there already, so a
# resent or redelivered message runs its body once (docs/design.md §5.36). Kept for a
# week (pruned by the guard), then forgotten. A database of an earlier version gets
# the table from create_tables (create_all makes what is missing).
deliveries = Table(
    "cronlease_deliveries",
    metadata,
    # the broker message's task id (Celery's ``task_id``)
    Column("task_id", _name_type(), primary_key=True),
    # the worker task's name, for people reading the table
    Column("name", String(MAX_NAME_LENGTH), nullable=False),
    # database clock, epoch seconds
    Column("claimed_at", Double, nullable=False),
    Index("cronlease_deliveries_claimed", "claimed_at"),
    **MYSQL_TABLE_OPTIONS,
)

# Schedules kept in the database (docs/design.md §5.37): one row per live schedule,
# written only through cronlease.Schedules, which checks a row as a replica will
# load it. A row names a *job* the replicas offer, never code: whoever can write
# this table chooses among what the code registers and passes it arguments.
schedules = Table(
    "cronlease_schedules",
    metadata,
    # the stored full name, ``<namespace>:<name>`` as a code task's lease row is named
    Column("name", _name_type(), primary_key=True),
    Column("namespace", String(MAX_NAME_LENGTH), nullable=False, server_default=""),
    Column("job", String(MAX_NAME_LENGTH), nullable=False),
    # exactly one of every (a duration as written: "90s", "1h") and cron
    Column("every", String(64), nullable=True),
    Column("cron", String(MAX_FINGERPRINT_LENGTH), nullable=True),
    Column("timezone", String(64), nullable=True),
    # JSON texts: a list, an object, an object of the task's other options
    Column("args", Text, nullable=False),
    Column("kwargs", Text, nullable=False),
    Column("options", Text, nullable=False),
    Column("enabled", Boolean, nullable=False, server_default=true()),
    # 1 when added, one more per change: an update may name the version it read
    Column("version", BigInteger, nullable=False),
    Column("changed_by", String(MAX_NAME_LENGTH), nullable=False),
    # database clock, epoch seconds
    Column("changed_at", Double, nullable=False),
    Index("cronlease_schedules_namespace", "namespace"),
    **MYSQL_TABLE_OPTIONS,
)

# The audit log of cronlease_schedules: one row per add, change and removal, inserted
# in the transaction of that write, never updated or deleted by cronlease. The
# highest seq of a namespace is what a replica polls to learn that a row changed.
schedule_changes = Table(
    "cronlease_schedule_changes",
    metadata,
    # Integer on SQLite: only an INTEGER PRIMARY KEY is its rowid, numbered by itself
    Column(
        "seq",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    Column("namespace", String(MAX_NAME_LENGTH), nullable=False, server_default=""),
    Column("name", _name_type(), nullable=False),
    Column("version", BigInteger, nullable=False),
    # add, set or remove
    Column("action", String(16), nullable=False),
    Column("changed_by", String(MAX_NAME_LENGTH), nullable=False),
    Column("changed_at", Double, nullable=False),
    # JSON: field -> [old, new]
    Column("changes", Text, nullable=False),
    Index("cronlease_schedule_changes_namespace", "namespace", "seq"),
    Index("cronlease_schedule_changes_name", "name", "seq"),
    **MYSQL_TABLE_OPTIONS,
)

# One row per namespace that has had a schedule written: each write locks it first, so
# the writes of a namespace commit in the order of their seq, and a replica that read
# max(seq) never misses a change that commits later with a lower one.
schedule_heads = Table(
    "cronlease_schedule_heads",
    metadata,
    Column("namespace", _name_type(), primary_key=True),
    **MYSQL_TABLE_OPTIONS,
)

# The jobs each replica offers (docs/design.md §5.37), so that a writer without the
# code can check a row and status can say when no live replica offers a job: written
# when a replica starts (and again after an outage), deleted at a clean shutdown;
# live iff its holder's cronlease_members row is.
jobs = Table(
    "cronlease_jobs",
    metadata,
    Column("holder", _name_type(MAX_HOLDER_LENGTH), nullable=False),
    Column("namespace", String(MAX_NAME_LENGTH), nullable=False, server_default=""),
    Column("job", _name_type(), nullable=False),
    # JSON: what the job is (call or command) and its parameters
    Column("description", Text, nullable=False),
    PrimaryKeyConstraint("holder", "job", name="cronlease_jobs_key"),
    **MYSQL_TABLE_OPTIONS,
)
