"""How the ``cronlease`` command words things: the narrow table, relative times, the
orphan summary, and where a config file's relative SQLite path points."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cronlease._status import TaskStatus
from cronlease._status.cells import relative
from cronlease.cli.output import fit_table
from cronlease.cli.table import orphans_summary
from cronlease.config import DATABASE_ENV, load_config
from cronlease.config._database import beside

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("offset", "text"),
    [
        (0.4, "now"),
        (-12.9, "12s ago"),
        (12, "in 12s"),
        (-185, "3m ago"),
        (3 * 3600 + 5 * 60, "in 3h05m"),
        (-2 * 3600, "2h ago"),
        (-(3 * 86400 + 4 * 3600), "3d04h ago"),
        (86400, "in 1d"),
    ],
)
def test_relative_times_are_coarse(offset: float, text: str) -> None:
    assert relative(NOW + timedelta(seconds=offset), NOW) == text


def test_fit_table_cuts_the_widest_shrinkable_column_first_with_an_ellipsis() -> None:
    headers = ["TASK", "SCHEDULE", "STATE"]
    rows = [["a" * 40, "b" * 30, "failing"], ["short", "every 1h", "idle"]]
    fitted = fit_table(headers, rows, 60, {"TASK": 12, "SCHEDULE": 10})
    widths = [max(len(row[i]) for row in [headers, *fitted]) for i in range(3)]
    assert sum(widths) + 2 * 2 == 60
    assert fitted[0][0].endswith("\u2026") and fitted[0][1].endswith("\u2026")
    assert fitted[0][2] == "failing" and fitted[1] == ["short", "every 1h", "idle"]
    assert abs(len(fitted[0][0]) - len(fitted[0][1])) <= 1  # the widest gave way first
    # never below a column's narrowest (nor its header): then the table stays wider
    tight = fit_table(headers, rows, 10, {"TASK": 12, "SCHEDULE": 10})
    assert [len(cell) for cell in tight[0][:2]] == [12, 10]
    assert fit_table(headers, [["x", "y", "z"]], 100, {"TASK": 4}) == [["x", "y", "z"]]


def orphan(name: str) -> TaskStatus:
    return TaskStatus(
        name=name,
        task=name,
        declared=False,
        enabled=None,
        schedule=None,
        state="idle",
        running=False,
        holder=None,
        fence=None,
        last_slot=None,
        lease_expires_at=None,
        lease_expires_in=None,
        next_fire=None,
        overdue=False,
    )


def test_orphan_summary_names_a_few_and_says_how_to_list_them_all() -> None:
    text = orphans_summary([orphan(f"gone-{i:04d}") for i in range(1400)])
    assert text.count("\n") == 1
    assert "1400 orphaned lease row(s)" in text and "gone-0004 and 1395 more" in text
    assert "gone-0005" not in text and "cronlease status --orphaned" in text
    assert "and" not in orphans_summary([orphan("one")]).split(":")[1]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///leases.db", "sqlite:///{folder}/leases.db"),
        ("sqlite:///data/leases.db?timeout=5", "sqlite:///{folder}/data/leases.db?timeout=5"),
        ("sqlite:////var/lib/leases.db", "sqlite:////var/lib/leases.db"),
        ("sqlite://", "sqlite://"),
        ("sqlite:///:memory:", "sqlite:///:memory:"),
        ("sqlite:///file:leases.db?mode=ro&uri=true", "sqlite:///file:leases.db?mode=ro&uri=true"),
        ("postgresql://app@db/app", "postgresql://app@db/app"),
        ("not a url", "not a url"),
    ],
)
def test_a_relative_sqlite_path_is_made_absolute_in_the_folder(
    url: str, expected: str, tmp_path: Path
) -> None:
    assert beside(url, tmp_path) == expected.format(folder=tmp_path.resolve())


def test_the_files_database_is_beside_it_and_the_environments_stays_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cronlease.toml"
    path.write_text('database = "sqlite:///leases.db"\n')
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    assert load_config(path).database == f"sqlite:///{tmp_path.resolve()}/leases.db"
    monkeypatch.setenv(DATABASE_ENV, "sqlite:///leases.db")  # the command line's: the cwd's
    assert load_config(path).database == "sqlite:///leases.db"
