"""Shared helpers for the benchmark scripts: URLs, a bench database, statistics, tables.

Benchmarks are run on demand (never by CI). Each script prints the exact
command that produced its table, the machine, and medians of several runs;
``--json FILE`` also writes the figures for ``compare.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine, make_url

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

POSTGRES_ADMIN_URL = os.environ.get(
    "CRONLEASE_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
MYSQL_URL = os.environ.get("CRONLEASE_BENCH_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/test")
BENCH_DATABASE = "cronlease_bench"

# (statement, parameters, positional parameter names or None for a mapping)
StatementWatcher = Callable[[str, Any, "tuple[str, ...] | None"], None]


@contextlib.contextmanager
def watch_statements(engine: Engine, on_statement: StatementWatcher) -> Iterator[None]:
    """Report every statement cronlease sends to the driver on ``engine``.

    Two paths: SQLAlchemy's execution (its cursor events) and cronlease's
    driver statements, which bypass those events (cronlease._lease.dialects.driver).
    """
    from cronlease._lease.dialects.driver import DriverStatement

    def on_execute(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        compiled = getattr(context, "compiled", None)
        names = (
            tuple(compiled.positiontup) if compiled is not None and compiled.positiontup else None
        )
        on_statement(statement, parameters, names)

    original = DriverStatement.execute

    def driver_execute(self: DriverStatement, conn: Any, params: Any) -> Any:
        compiled = self.compiled(conn.dialect)
        on_statement(compiled.sql, compiled.parameters(params), compiled.positions)
        return original(self, conn, params)

    event.listen(engine, "before_cursor_execute", on_execute)
    DriverStatement.execute = driver_execute  # type: ignore[method-assign]
    try:
        yield
    finally:
        DriverStatement.execute = original  # type: ignore[method-assign]
        event.remove(engine, "before_cursor_execute", on_execute)


def postgres_url() -> str:
    """A database of its own, so pg_stat_database counts only the benchmark's transactions."""
    admin = make_url(POSTGRES_ADMIN_URL)
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        exists = conn.execute(
            text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": BENCH_DATABASE}
        ).first()
        if not exists:
            conn.execute(text(f"CREATE DATABASE {BENCH_DATABASE}"))
    engine.dispose()
    return admin.set(database=BENCH_DATABASE).render_as_string(hide_password=False)


def url_for(backend: str, tmp: Path | None = None) -> str:
    if backend == "postgresql":
        return postgres_url()
    if backend == "mysql":
        return MYSQL_URL
    if backend == "sqlite":
        path = (tmp or Path("/tmp")) / f"cronlease-bench-{os.getpid()}.db"
        return f"sqlite:///{path}"
    raise SystemExit(f"unknown backend {backend!r}")


def pg_commits(url: str) -> int:
    """Committed transactions of the bench database so far (after backends flushed stats)."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:  # one statement: itself counted only by the next call
        value = conn.execute(
            text("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        ).scalar_one()
    engine.dispose()
    return int(value)


def pg_has_statements(url: str) -> bool:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            loaded = conn.execute(text("SHOW shared_preload_libraries")).scalar_one()
    finally:
        engine.dispose()
    return "pg_stat_statements" in str(loaded)


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def summary(samples: Sequence[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(samples),
        "p50": percentile(samples, 0.50),
        "p99": percentile(samples, 0.99),
    }


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    system = f"{platform.system()} {platform.release()}"
    return f"{os.cpu_count()} cores ({model}), {system}, Python {platform.python_version()}"


def header(title: str) -> None:
    print(f"# {title}")
    print(f"command: python {shlex.join(sys.argv)}")
    print(f"machine: {machine()}")
    print(f"date:    {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    print()


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [[_cell(value) for value in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for index, row in enumerate(cells):
        print(
            "| "
            + " | ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True))
            + " |"
        )
        if index == 0:
            print("|" + "|".join("-" * (width + 2) for width in widths) + "|")
    print()


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def write_json(path: str | None, script: str, figures: dict[str, float]) -> None:
    if not path:
        return
    target = Path(path)
    data: dict[str, Any] = json.loads(target.read_text()) if target.exists() else {}
    data[script] = {"command": f"python {shlex.join(sys.argv)}", "figures": figures}
    target.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
