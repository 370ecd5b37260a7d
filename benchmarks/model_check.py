"""The SPIN model of the lease protocol (spec/lease.pml) on larger bounds than CI's.

CI checks two replicas, two slots and a clock horizon of 6 ticks exhaustively
(tests/unit/test_lease_model.py). This runs, on demand:

- ``ci``: that exhaustive check again, for its states, memory and time;
- ``slots3``: three slots, a horizon of 8 ticks, two crashes: a bitstate search
  (a Bloom filter of visited states: it may miss states, never reports a false
  error), covering far more than an exhaustive search could hold in memory;
- ``lost-writes``: the failover model with retries and the watcher, the
  properties that hold only without lost writes checked up to the failover, the
  two that fail with lost writes waived (docs/design.md, "What the model checks");
- ``p4w-lost-writes``: the same with only P1w waived: a replica never hands out a
  fence twice, lost writes and retries included (since the renumbering matches
  the nonce alone);
- ``fair``: the liveness claim under weak fairness (pan -a -f); CI checks it
  without fairness, which is stronger;
- ``run-now``: a manual run beside two slots, bitstate.

    python benchmarks/model_check.py [--only NAME] [--bits 28]

Each line: the configuration, errors, states, memory, seconds, and whether the
search was complete; a counterexample is printed as its steps.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import spin_model  # noqa: E402

BITSTATE = ("-DSAFETY", "-DBITSTATE")


def configurations(bits: int) -> dict[str, dict[str, object]]:
    return {
        "ci": {"defines": ()},
        "slots3": {
            "defines": ("-DNS=3", "-DMAXT=8", "-DMAXCRASH=2"),
            "cc_flags": BITSTATE,
            "pan_flags": (f"-w{bits}",),
        },
        "lost-writes": {
            "defines": ("-DLOST_WRITES", "-DWAIVE_P4W", "-DWAIVE_P1W"),
            "cc_flags": BITSTATE,
            "pan_flags": (f"-w{bits}",),
        },
        "p4w-lost-writes": {
            "defines": ("-DLOST_WRITES", "-DWAIVE_P1W"),
            "cc_flags": BITSTATE,
            "pan_flags": (f"-w{bits}",),
        },
        "fair": {
            "defines": ("-DLIVENESS",),
            "cc_flags": ("-DCOLLAPSE", "-DNFAIR=3"),
            "pan_flags": ("-a", "-f"),
        },
        "run-now": {
            "defines": ("-DRUN_NOW",),
            "cc_flags": BITSTATE,
            "pan_flags": (f"-w{bits}",),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="one configuration: " + ", ".join(configurations(28)))
    parser.add_argument("--bits", type=int, default=28, help="bitstate table: 2**BITS bits")
    args = parser.parse_args()
    problem = spin_model.available()
    if problem:
        raise SystemExit(f"cannot check the model: {problem}")
    chosen = configurations(args.bits)
    if args.only:
        chosen = {args.only: chosen[args.only]}
    print(f"python benchmarks/model_check.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"{'configuration':<14} {'errors':>6} {'states':>12} {'MB':>8} {'s':>8}  complete")
    for name, options in chosen.items():
        with tempfile.TemporaryDirectory() as workdir:
            result = spin_model.check(Path(workdir), timeout=3600.0, **options)  # type: ignore[arg-type]
        print(
            f"{name:<14} {result.errors:>6} {result.states:>12} {result.memory_mb:>8.0f}"
            f" {result.seconds:>8.1f}  {'yes' if result.complete else 'no'}"
        )
        if result.errors:
            print(result.story())


if __name__ == "__main__":
    main()
