"""A child that reports what a process test relies on: ``python -m tests.support.probe_child``.

Prints ``pid``, ``env`` (of ``PROBE``), ``offset`` (the local UTC offset, from
``TZ``), ``argv`` and ``cwd`` lines; then echoes stdin lines (``echo X``) until
``exit N`` (exit with N, after a non-daemon thread and an ``atexit`` handler
print their lines) or ``hang`` (sleep until a signal ends it). ``err X`` writes
X to stderr.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time


def _late_line() -> None:
    time.sleep(0.2)  # still running when main returns: the exit must wait for it
    print("thread", flush=True)


def main() -> int:
    print(f"pid {os.getpid()}", flush=True)
    print(f"env {os.environ.get('PROBE', '')}", flush=True)
    print(f"offset {time.localtime().tm_gmtoff}", flush=True)
    print(f"argv {json.dumps(sys.argv[1:])}", flush=True)
    print(f"cwd {os.getcwd()}", flush=True)
    for line in sys.stdin:
        word, _, rest = line.rstrip("\n").partition(" ")
        if word == "echo":
            print(f"echo {rest}", flush=True)
        elif word == "err":
            print(rest, file=sys.stderr, flush=True)
        elif word == "hang":
            print("hanging", flush=True)
            time.sleep(3600)
        elif word == "exit":
            atexit.register(lambda: print("atexit", flush=True))
            # non-daemon: the interpreter joins it before it exits, whoever started it
            threading.Thread(target=_late_line).start()
            return int(rest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
