"""Regression check: rerun the benchmarks and print each figure against the recorded one.

Recorded figures live in ``benchmarks/results.json`` (written by the scripts
with ``--json``; the full runs behind README.md). ``--quick`` reruns shorter
versions (fewer iterations, a smaller and shorter fleet, a shorter idle run);
ratios of times are then indicative only, counts (duplicates, misses,
transactions, round trips, statements per tick) must match exactly.

Then it checks what must hold whatever the machine, and exits 1 if one fails:
no duplicate, miss, tick started past its grace or traceback in any run; in a
fleet run of several sizes, PostgreSQL CPU and transactions per tick at the
largest within 1.5x those at the smallest, runs per replica within 0.5-1.5x
the fair share, and start lateness p99 at most 100 ms; in a tick storm, the
last start within the grace (60 s).

    python benchmarks/compare.py [--quick] [--record]
        [--only acquire,batch,limit,roundtrips,fleet,idle,idle_fleet,tick_storm]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import header, table

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "results.json"

FULL = {
    "acquire": ["acquire.py"],
    "batch": ["batch.py"],
    "limit": ["limit.py"],
    "roundtrips": ["roundtrips.py"],
    "fleet": ["fleet.py"],
    "idle": ["idle.py"],
    "idle_fleet": ["idle_fleet.py"],
    "tick_storm": ["tick_storm.py"],
}
QUICK = {
    "acquire": ["acquire.py", "--iterations", "500", "--runs", "2"],
    "batch": ["batch.py", "--rounds", "5", "--runs", "1"],
    "limit": ["limit.py", "--rounds", "5", "--runs", "1"],
    "roundtrips": ["roundtrips.py"],
    "fleet": ["fleet.py", "--replicas", "8", "--tasks", "500", "--duration", "30"],
    "idle": ["idle.py", "--duration", "65"],
    "idle_fleet": ["idle_fleet.py", "--replicas", "8", "--minutes", "1"],
    "tick_storm": ["tick_storm.py", "--tasks", "10000", "--replicas", "4"],
}
#: counts that must be 0 in every run, by a figure's last name
ZERO = ("duplicates", "misses", "started_past_grace", "tracebacks")
#: a fleet of several sizes: the largest's cost per tick against the smallest's
FLAT = ("pg_cpu_ms_per_tick", "xacts_per_tick")
FLAT_RATIO = 1.5
SHARE = (0.5, 1.5)
LATE_P99_MS = 100.0
STORM_GRACE_S = 60.0


def checks(fresh: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """(what, held, the figures) for every rule the fresh figures must keep."""
    found: list[tuple[str, bool, str]] = []
    for script, data in sorted(fresh.items()):
        figures: dict[str, float] = data["figures"]
        for key, value in sorted(figures.items()):
            if key.rsplit(".", 1)[-1] in ZERO:
                found.append((f"{script} {key} = 0", value == 0, f"{value:g}"))
        if script == "fleet":
            sizes: dict[str, dict[int, dict[str, float]]] = {}
            for key, value in figures.items():
                match = re.fullmatch(r"r(\d+)x(t\d+)\.(.+)", key)
                if match:
                    replicas, tasks, name = int(match[1]), match[2], match[3]
                    sizes.setdefault(tasks, {}).setdefault(replicas, {})[name] = value
            for tasks, by_size in sorted(sizes.items()):
                for replicas, values in sorted(by_size.items()):
                    low, high = values.get("runs_share_min"), values.get("runs_share_max")
                    if low is not None and high is not None:
                        found.append(
                            (
                                f"fleet r{replicas}x{tasks} runs per replica within "
                                f"{SHARE[0]}-{SHARE[1]}x the fair share",
                                SHARE[0] <= low and high <= SHARE[1],
                                f"{low:.2f}-{high:.2f}",
                            )
                        )
                if len(by_size) < 2:
                    continue
                small, large = min(by_size), max(by_size)
                for name in FLAT:
                    base, now = by_size[small].get(name), by_size[large].get(name)
                    if base and now is not None:
                        found.append(
                            (
                                f"fleet {name} at {large} <= {FLAT_RATIO}x at {small} ({tasks})",
                                now / base <= FLAT_RATIO,
                                f"{base:.1f} -> {now:.1f} ({now / base:.2f}x)",
                            )
                        )
                late = by_size[large].get("late_p99_ms")
                if late is not None:
                    found.append(
                        (
                            f"fleet start lateness p99 at {large} <= {LATE_P99_MS:g} ms ({tasks})",
                            late <= LATE_P99_MS,
                            f"{late:.0f} ms",
                        )
                    )
        if script == "tick_storm":
            for key, value in sorted(figures.items()):
                if key.endswith(".last_start_s"):
                    found.append(
                        (
                            f"tick_storm {key} <= {STORM_GRACE_S:g} s",
                            value <= STORM_GRACE_S,
                            f"{value:.1f} s",
                        )
                    )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=",".join(FULL))
    parser.add_argument(
        "--record", action="store_true", help=f"write the new figures to {RECORDED.name}"
    )
    args = parser.parse_args()
    header("compare: rerun and compare with benchmarks/results.json")
    plans = QUICK if args.quick else FULL
    recorded = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        fresh_path = Path(tmp) / "fresh.json"
        for name in args.only.split(","):
            command = [
                sys.executable,
                str(HERE / plans[name][0]),
                *plans[name][1:],
                "--json",
                str(fresh_path),
            ]
            print("running:", " ".join(command[1:]), flush=True)
            subprocess.run(command, check=True, cwd=HERE.parent)
        fresh = json.loads(fresh_path.read_text())
    rows = []
    for script, data in fresh.items():
        before = recorded.get(script, {}).get("figures", {})
        for key, value in sorted(data["figures"].items()):
            old = before.get(key)
            if old in (None, 0):
                ratio = "-" if old is None else ("=" if value == 0 else "new")
            else:
                ratio = f"{value / old:.2f}x"
            rows.append([script, key, "-" if old is None else old, value, ratio])
    table(["script", "figure", "recorded", "now", "now/recorded"], rows)
    if args.record:
        recorded.update(fresh)
        RECORDED.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
        print(f"recorded in {RECORDED}")
    verdicts = checks(fresh)
    table(["check", "held", "figures"], [[w, "yes" if ok else "NO", f] for w, ok, f in verdicts])
    if not all(ok for _, ok, _ in verdicts):
        sys.exit(1)


if __name__ == "__main__":
    main()
