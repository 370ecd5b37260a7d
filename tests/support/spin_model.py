"""Build and check spec/lease.pml with SPIN; turn a counterexample into a story.

``check(workdir, defines)`` copies the model into ``workdir``, runs ``spin -a``,
compiles the verifier and runs it; when it reports an error, ``spin -t`` replays
the trail. The model prints one ``@@`` line per step during a replay (pan prints
nothing while it searches), so the story is those lines in order, and the
violated property is named by the ``/* property: NAME */`` comment right above
the assertion whose line ``spin -t`` reports, or, for an acceptance cycle, by the
``ltl`` claim's name. ``liveness()`` checks the claim (``-DLIVENESS``, pan ``-a``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "spec" / "lease.pml"

# assertion names; the run row outcome numbers of the model, in words
_PROPERTY = re.compile(r"/\*\s*property:\s*(\w+)\s*\*/")
_CLAIM = re.compile(r"^ltl\s+(\w+)", re.M)
#: pan searching for acceptance cycles; without -f (weak fairness): every cycle, fair
#: or not, so no cycle found means none under weak fairness either (docs/design.md)
#: no -DCOLLAPSE: the state space fits in memory (~0.7 GB at most) and the search runs
#: a third faster without compressing each state
LIVENESS_CC: tuple[str, ...] = ()
LIVENESS_PAN = ("-a",)
_OUTCOMES = {
    0: "none",
    1: "running",
    2: "done",
    3: "failed",
    4: "abandoned",
    5: "lost",
    6: "missed",
}


@dataclass
class Result:
    defines: tuple[str, ...]
    errors: int
    states: int
    memory_mb: float
    seconds: float
    depth: int
    complete: bool
    output: str
    violated: str | None = None  # the property's name, when errors
    steps: list[str] = field(default_factory=list)

    def story(self) -> str:
        head = f"{self.violated} violated ({' '.join(self.defines) or 'no options'}):"
        return "\n".join([head, *(f"  {step}" for step in self.steps)])


def available() -> str | None:
    """None if spin and a C compiler are on PATH, else what is missing."""
    missing = [tool for tool in ("spin", "gcc") if shutil.which(tool) is None]
    return f"not installed: {', '.join(missing)}" if missing else None


def properties_by_line(text: str) -> dict[int, str]:
    """Line number (1-based) of each assertion -> the property named just above it."""
    named: dict[int, str] = {}
    pending: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        found = _PROPERTY.search(line)
        if found:
            pending = found.group(1)
        elif pending and "assert(" in line:
            named[number] = pending
            pending = None
    return named


def check(
    workdir: Path,
    defines: tuple[str, ...] = (),
    *,
    pan_flags: tuple[str, ...] = (),
    cc_flags: tuple[str, ...] = ("-DSAFETY",),
    breadth_first: bool = False,
    optimize: str = "-O1",
    timeout: float = 600.0,
) -> Result:
    """Verify the model with ``defines`` (e.g. ``("-DNO_EXPIRY",)``) in ``workdir``.

    ``breadth_first`` finds a shortest counterexample (pan built with -DBFS), the
    readable one for a mutation; depth-first is faster for a full verification.
    ``optimize="-O0"`` compiles in a seventh of the time, for a search that ends soon;
    ``-O1`` (the default) compiles in half the time of ``-O2`` and searches as fast.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    model = workdir / MODEL.name
    shutil.copyfile(MODEL, model)
    _run(["spin", *defines, "-a", model.name], workdir, timeout)
    flags = [*cc_flags, *(["-DBFS"] if breadth_first else [])]
    _run(["gcc", optimize, "-w", *flags, "-o", "pan", "pan.c"], workdir, timeout)
    started = time.monotonic()
    # -m: the search depth bound; -n: no listing of unreached code
    out = _run(["./pan", "-m100000", "-n", *pan_flags], workdir, timeout, check=False)
    seconds = time.monotonic() - started
    result = Result(
        defines=defines,
        errors=_number(r"errors:\s*(\d+)", out),
        states=_number(r"(\d+) states, stored", out),
        memory_mb=float(_text(r"([\d.]+)\s+total actual memory usage", out) or 0),
        seconds=seconds,
        depth=_number(r"depth reached (\d+)", out),
        complete="Search not completed" not in out and "max search depth too small" not in out,
        output=out,
    )
    if result.errors:
        replay = _run(["spin", *defines, "-t", model.name], workdir, timeout, check=False)
        result.steps = summarize(replay)
        failed = re.search(r"lease\.pml:(\d+), Error: assertion violated", replay)
        if failed:
            result.violated = properties_by_line(model.read_text()).get(int(failed.group(1)))
        elif "acceptance cycle" in out:
            claim = _CLAIM.search(model.read_text())
            result.violated = claim.group(1) if claim else "acceptance cycle"
    return result


def liveness(
    workdir: Path, defines: tuple[str, ...] = (), *, optimize: str = "-O1", timeout: float = 600.0
) -> Result:
    """Check the model's ``ltl`` claim (and its assertions) with ``-DLIVENESS``: a search
    for acceptance cycles. ``optimize="-O0"`` for a search that ends soon (a mutation)."""
    return check(
        workdir,
        ("-DLIVENESS", *defines),
        pan_flags=LIVENESS_PAN,
        cc_flags=LIVENESS_CC,
        optimize=optimize,
        timeout=timeout,
    )


def summarize(replay: str) -> list[str]:
    """The steps a trail replay printed, outcome numbers in words."""
    steps = []
    for line in replay.splitlines():
        line = line.strip()
        if line.startswith("@@ "):
            step = re.sub(
                r"run row (\d)", lambda m: f"run row {_OUTCOMES[int(m.group(1))]}", line[3:]
            )
            steps.append(step)
    return steps


def _run(command: list[str], cwd: Path, timeout: float, *, check: bool = True) -> str:
    done = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    out = done.stdout + done.stderr
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{out}")
    return out


def _text(pattern: str, text: str) -> str | None:
    found = re.search(pattern, text)
    return found.group(1) if found else None


def _number(pattern: str, text: str) -> int:
    found = _text(pattern, text)
    return int(found) if found else 0
