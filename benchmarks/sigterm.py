"""SIGTERM under CPU load: many foreground replicas, each sent one SIGTERM at a random
moment of its life; how many fail to exit within the deadline (hangs).

Each replica is ``Scheduler.run_forever()`` with ``--tasks`` tasks every second
on one SQLite file, forked from this warm interpreter (a fresh interpreter per
replica would spend the machine on imports), then sent SIGTERM after a random
delay (counted from its call of ``run_forever``: start-up, the stop-wait, a
tick in flight) while ``--burners`` busy loops keep both cores loaded. Many
tasks keep the acquirer holding the GIL for milliseconds each second: the main
thread, woken from its wait, waits for the GIL while holding the wait's lock —
the window where a handler that takes that lock hangs. A replica still alive
``--deadline`` seconds after its SIGTERM is a hang: its stack is printed
(py-spy, when installed), then it is killed. ``--tree DIR`` measures the
cronlease of another checkout (an older main).

    python benchmarks/sigterm.py [--signals 1000] [--parallel 8] [--burners 2]
                                 [--tasks 200] [--deadline 20] [--tree DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _common import header, table, write_json


def replica(url: str, index: int, ready: int, tasks: int) -> None:
    """In the forked child: a foreground replica until its signal; never returns.
    Writes to ``ready`` as it calls ``run_forever`` (the signal's delay counts from there)."""
    code = 1
    try:
        from cronlease import Scheduler

        scheduler = Scheduler(url, shutdown_grace=5, history_retention=None)
        for task in range(tasks):
            scheduler.add_task(lambda: None, every="1s", name=f"sigterm-{index % 8}-{task}")
        os.write(ready, b"r")
        scheduler.run_forever()
        code = 0
    finally:
        os._exit(code)


@dataclass
class Child:
    ready: int  # read end of the child's ready pipe
    due: float | None = None  # when to send its SIGTERM
    signalled: float | None = None  # when it was sent


def burn() -> None:
    while True:
        pass


def stack_of(pid: int) -> str:
    spy = shutil.which("py-spy")
    if spy is None:
        return "(py-spy not installed: no stack)"
    done = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True)
    return done.stdout or done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--signals", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--burners", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=200, help="tasks per replica, every 1 s")
    parser.add_argument("--deadline", type=float, default=20.0)
    parser.add_argument("--tree", help="a checkout whose cronlease to measure")
    parser.add_argument("--json")
    args = parser.parse_args()
    header("SIGTERM under load: replicas that do not exit")
    if args.tree:
        sys.path.insert(0, str(Path(args.tree).resolve()))
    import cronlease  # warm: the children are forked with it imported

    print(f"cronlease from {Path(cronlease.__file__).parent}\n")
    burners = []
    for _ in range(args.burners):
        pid = os.fork()
        if pid == 0:
            burn()
        burners.append(pid)
    tmp = Path(tempfile.mkdtemp(prefix="cronlease-sigterm-"))
    url = f"sqlite:///{tmp / 'leases.db'}"
    sent = exited = hangs = 0
    exit_times: list[float] = []
    codes: dict[int, int] = {}
    live: dict[int, Child] = {}
    started = time.monotonic()
    try:
        while exited + hangs < args.signals:
            while len(live) < args.parallel and sent + len(live) < args.signals:
                ready, ready_w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(ready)
                    replica(url, sent + len(live), ready_w, args.tasks)
                os.close(ready_w)
                os.set_blocking(ready, False)
                live[pid] = Child(ready)
            now = time.monotonic()
            for pid, child in list(live.items()):
                if child.due is None:
                    try:
                        if os.read(child.ready, 1):
                            child.due = now + random.uniform(0.0, 2.0)
                    except BlockingIOError:
                        pass
                if child.signalled is None and child.due is not None and now >= child.due:
                    os.kill(pid, signal.SIGTERM)
                    child.signalled = now
                    sent += 1
                    continue
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    os.close(child.ready)
                    del live[pid]
                    exited += 1
                    code = os.waitstatus_to_exitcode(status)
                    codes[code] = codes.get(code, 0) + 1
                    if child.signalled is not None:
                        exit_times.append(now - child.signalled)
                elif child.signalled is not None and now - child.signalled > args.deadline:
                    hangs += 1
                    print(f"HANG: replica {pid} alive {args.deadline} s after SIGTERM")
                    print(stack_of(pid))
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    os.close(child.ready)
                    del live[pid]
            time.sleep(0.01)
    finally:
        for pid in [*live, *burners]:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        shutil.rmtree(tmp, ignore_errors=True)
    print("exit statuses:", ", ".join(f"{code}: {n}" for code, n in sorted(codes.items())))
    exit_times.sort()
    p99 = exit_times[int(len(exit_times) * 0.99)] if exit_times else float("nan")
    worst = exit_times[-1] if exit_times else float("nan")
    table(
        ["SIGTERMs", "exited", "hangs", "exit p50 s", "exit p99 s", "exit max s", "wall s"],
        [
            [
                sent,
                exited,
                hangs,
                exit_times[len(exit_times) // 2] if exit_times else float("nan"),
                p99,
                worst,
                time.monotonic() - started,
            ]
        ],
    )
    write_json(args.json, "sigterm", {"hangs": hangs, "exit_p99_s": p99})
    sys.exit(1 if hangs else 0)


if __name__ == "__main__":
    main()
