"""Config size: `cronlease check` and `cronlease run` start-up for 1k to 10k tasks.

Each figure is the wall time of a fresh process (Python start-up included):
``check`` until it exits, ``run`` until it logs "cronlease replica ... started"
(the config loaded, every task declared, APScheduler started), then SIGTERM.
All tasks share one schedule (``every = "1h"``, one APScheduler job), the
common shape; ``--distinct`` gives each its own (one job per task).

    python benchmarks/config_scale.py [--sizes 1000,2000,4000,10000] [--runs 3] [--distinct]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import header, median, table, write_json


def write_config(path: Path, tasks: int, distinct: bool, database: Path) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write(f'database = "sqlite:///{database}"\n')
        for i in range(tasks):
            every = f"{3600 + i}s" if distinct else "1h"
            out.write(f'\n[tasks.task-{i}]\ncommand = "true"\nevery = "{every}"\n')


def time_check(config: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "cronlease", "check", "-c", str(config)],
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - start


def time_run_start(config: Path) -> float:
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "cronlease", "run", "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stderr is not None
    try:
        for line in process.stderr:
            if "cronlease replica" in line and "started" in line:
                return time.perf_counter() - start
        raise RuntimeError(f"cronlease run exited with {process.wait()} before starting")
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,2000,4000,10000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--distinct", action="store_true", help="one schedule per task")
    parser.add_argument("--json")
    args = parser.parse_args()
    header(
        "config size: check and run start-up" + (" (distinct schedules)" if args.distinct else "")
    )
    rows = []
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        for size in (int(part) for part in args.sizes.split(",")):
            config = Path(folder) / f"tasks-{size}.toml"
            write_config(config, size, args.distinct, Path(folder) / f"leases-{size}.db")
            check = median(time_check(config) for _ in range(args.runs))
            run = median(time_run_start(config) for _ in range(args.runs))
            rows.append([size, f"{check:.2f}", f"{run:.2f}"])
            figures[f"check_{size}_s"] = check
            figures[f"run_start_{size}_s"] = run
    table(["tasks", "check (s)", "run start-up (s)"], rows)
    write_json(args.json, "config_scale", figures)


if __name__ == "__main__":
    main()
