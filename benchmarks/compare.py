"""Regression check: rerun the benchmarks and print each figure against the recorded one.

Recorded figures live in ``benchmarks/results.json`` (written by the scripts
with ``--json``; the full runs behind README.md). ``--quick`` reruns shorter
versions (fewer iterations, a smaller and shorter fleet, a shorter idle run);
ratios of times are then indicative only, counts (duplicates, misses,
transactions, round trips, statements per tick) must match exactly.

    python benchmarks/compare.py [--quick] [--record]
        [--only acquire,batch,limit,roundtrips,fleet,idle,idle_fleet]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

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
}
QUICK = {
    "acquire": ["acquire.py", "--iterations", "500", "--runs", "2"],
    "batch": ["batch.py", "--rounds", "5", "--runs", "1"],
    "limit": ["limit.py", "--rounds", "5", "--runs", "1"],
    "roundtrips": ["roundtrips.py"],
    "fleet": ["fleet.py", "--replicas", "8", "--tasks", "500", "--duration", "30"],
    "idle": ["idle.py", "--duration", "65"],
    "idle_fleet": ["idle_fleet.py", "--replicas", "8", "--minutes", "1"],
}


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


if __name__ == "__main__":
    main()
