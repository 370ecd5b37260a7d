"""A task's jitter: how long after its slot a tick starts, the same on every replica.

systemd's ``RandomizedDelaySec``, made deterministic: the offset is a pure
function of the task's stored full name and the slot, so every replica delays a
tick by the same amount and the fleet still agrees on who runs it (the slot and
the lease are those of the un-jittered fire time). A hash, not a random source:
``hash()`` is salted per process, and a seeded generator per tick costs more.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from cronlease._timing.schedule import Schedule, slot_of

__all__ = ["offset", "start_after"]

_SCALE = float(1 << 64)


def offset(full_name: str, slot: int, jitter: float, gap: float) -> float:
    """Seconds in [0, min(jitter, gap / 2)) after the slot's fire time at which its tick
    starts; ``gap``: the seconds to the schedule's next fire time (the clamp keeps a
    jittered start and its grace before the next slot)."""
    most = min(jitter, gap / 2)
    if most <= 0:
        return 0.0
    digest = hashlib.blake2b(f"{full_name}\x00{slot}".encode(), digest_size=8).digest()
    return most * (int.from_bytes(digest, "big") / _SCALE)


def start_after(full_name: str, schedule: Schedule, fire_time: datetime, jitter: float) -> float:
    """Seconds after ``fire_time`` the tick of the task stored as ``full_name`` starts
    (0 without jitter): what admission waits for, and what the status allows for."""
    if not jitter:
        return 0.0
    return offset(full_name, slot_of(fire_time), jitter, schedule.gap_after(fire_time))
