"""Where the test suite's time goes: seconds per directory, file, backend and test.

    pytest -n 2 --junitxml=/tmp/junit.xml
    python benchmarks/suite_times.py /tmp/junit.xml [--top 40]
    python benchmarks/suite_times.py /tmp/junit.xml --write tests/durations.json

Reads a JUnit XML (every test's time, setup and teardown included) and prints the sums
per top directory, per backend (the ``[sqlite]``/``[postgresql]``/``[mysql]`` part of a
test id), per file, and the slowest tests. The sums are of test time, not wall time: on
two workers the run takes about half of the total, when the workers stay busy.

``--write`` keeps every test of half a second or more, by node id, in the file the
test run orders its tests by (tests/support/ordering.py): refresh it from a CI run's
report when tests were added or got faster or slower.
"""

from __future__ import annotations

import argparse
import json
import re
import xml.etree.ElementTree as ET
from collections import defaultdict

BACKEND = re.compile(r"\[(?:.*-)?(sqlite|postgresql|mysql)(?:-.*)?\]")


def tests(path: str) -> list[tuple[str, str, float]]:
    """(file, test id, seconds) of every test case in the report."""
    found = []
    for case in ET.parse(path).getroot().iter("testcase"):
        classname = case.get("classname", "")
        module, _, rest = classname.partition(".Test")
        file = module.replace(".", "/") + ".py"
        name = f"{'Test' + rest + '::' if rest else ''}{case.get('name', '')}"
        found.append((file, name, float(case.get("time", 0.0))))
    return found


def show(title: str, sums: dict[str, list[float]], top: int | None = None) -> None:
    print(f"\n{title}")
    rows = sorted(sums.items(), key=lambda item: -sum(item[1]))
    for key, times in rows[:top]:
        print(f"  {sum(times):9.1f} s  {len(times):5d}  {key}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--write", metavar="JSON", help="write the durations file here")
    args = parser.parse_args()
    found = tests(args.junit)
    if args.write:
        durations = {f"{file}::{name}": round(s, 1) for file, name, s in found if s >= 0.5}
        with open(args.write, "w") as out:
            json.dump(dict(sorted(durations.items())), out, indent=0)
            out.write("\n")
        print(f"{len(durations)} tests of 0.5 s or more written to {args.write}")
    total = sum(seconds for _, _, seconds in found)
    print(f"{len(found)} tests, {total:.1f} s of test time")
    by_dir: dict[str, list[float]] = defaultdict(list)
    by_backend: dict[str, list[float]] = defaultdict(list)
    by_file: dict[str, list[float]] = defaultdict(list)
    by_test: dict[str, list[float]] = defaultdict(list)
    for file, name, seconds in found:
        by_dir["/".join(file.split("/")[:2])].append(seconds)
        match = BACKEND.search(name)
        by_backend[match.group(1) if match else "(none)"].append(seconds)
        by_file[file].append(seconds)
        by_test[f"{file}::{BACKEND.sub('', name)}"].append(seconds)
    show("per directory (seconds, tests)", by_dir)
    show("per backend", by_backend)
    show("per file", by_file, args.top)
    show("per test, its parameters summed", by_test, args.top)
    over = [seconds for _, _, seconds in found if seconds > 5]
    print(f"\n{len(over)} tests over 5 s: {sum(over):.1f} s")


if __name__ == "__main__":
    main()
