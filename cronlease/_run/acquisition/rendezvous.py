"""Rendezvous hashing of ticks over the live members: who goes first (docs/design.md §4.4).

Each scheduled tick (task full name, slot) scores every member of the
replica's cohort — the live members that declare the same tasks — with a
stable 64-bit hash of (task, slot, member id); the highest score is the
tick's *preferred* replica, the second its *backup*. Every replica computes
the same order from the same members, without talking to the others; the
slot in the hash spreads a task's ticks over the fleet, and a member that
joins or leaves moves only the ticks it would win (or won).

The hash is BLAKE2b for the strings (once per task name and per member id),
and a 64-bit finalizer (MurmurHash3's ``fmix64``) to combine them per tick:
a replica ranks each tick against the members ahead of it only until it has
found two, so a tick costs it about 2 ln(R) mixes, not R.

This is an optimisation of who *tries* first. Which replica runs a tick is
decided by the lease row's slot cursor alone (§3.2): two replicas that
disagree on the members both try, and one wins.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Final, Literal

__all__ = [
    "ACTIVE_PER_TICK",
    "BACKUP",
    "LEGACY_WINDOW",
    "OTHER",
    "PREFERRED",
    "Place",
    "Ranking",
    "active_window",
    "member_key",
    "rendezvous_order",
    "score",
    "tick_key",
]

#: the smallest *active window*: at most this many members touch the ticks of one
#: instant (0: every member may), more only if the cohort's workers need it
#: (:func:`active_window`): statements per tick stop growing with the fleet beyond
#: it (docs/design.md §4.4)
ACTIVE_PER_TICK = 8
#: the window of a member row that names none (an earlier build's: 16 per instant)
LEGACY_WINDOW = 16
PREFERRED: Final = 1
BACKUP: Final = 2
OTHER: Final = 3
Place = Literal[1, 2, 3]

_MASK = (1 << 64) - 1
_C1 = 0xFF51AFD7ED558CCD
_C2 = 0xC4CEB9FE1A85EC53
_GOLDEN = 0x9E3779B97F4A7C15


def active_window(tasks: int, max_workers: int) -> int:
    """How many members touch an instant, for a replica of ``tasks`` declared tasks and
    ``max_workers`` workers: :data:`ACTIVE_PER_TICK`, or more if the window's members
    could not run an instant of every task as preferred replica (half their workers)
    and backup (the other half): at least ``2 x tasks / max_workers``. 0 (no window:
    every member) while :data:`ACTIVE_PER_TICK` is 0."""
    if not ACTIVE_PER_TICK:
        return 0
    needed = math.ceil(2 * max(0, tasks) / max(1, max_workers))
    return max(ACTIVE_PER_TICK, needed)


def _hash64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def _mix(x: int) -> int:
    """MurmurHash3's 64-bit finalizer: a bijection whose every output bit depends on
    every input bit."""
    x ^= x >> 33
    x = (x * _C1) & _MASK
    x ^= x >> 33
    x = (x * _C2) & _MASK
    return x ^ (x >> 33)


def member_key(holder: str) -> int:
    """A member's 64-bit key, from its holder id."""
    return _hash64(b"member\0" + holder.encode("utf-8", "surrogatepass"))


@lru_cache(maxsize=65536)
def _name_key(name: str) -> int:
    return _hash64(b"task\0" + name.encode("utf-8", "surrogatepass"))


def tick_key(name: str, slot: int) -> int:
    """A tick's 64-bit key, from its task's full name and its slot."""
    return _mix(_name_key(name) ^ _mix((slot * _GOLDEN) & _MASK))


def score(tick: int, member: int) -> int:
    """The rendezvous score of a member (its key) for a tick (its key)."""
    return _mix(tick ^ member)


class Ranking:
    """The rendezvous order of one replica's cohort, from this replica's point of view.

    Built once per membership read. ``members`` are the holder ids of the
    cohort, this replica's (``me``) among them. With ``active`` (the cohort's
    window, :func:`active_window`; default :data:`ACTIVE_PER_TICK`) and a larger
    cohort, each instant first picks its ``active`` members — a window on the
    members sorted by key, at an offset that moves by the golden ratio from one
    second to the next — and a tick's order is over those: the replicas that
    touch the ticks of one instant are at most ``active``, whatever the fleet's
    size, and over a few seconds every member is active equally often.
    """

    __slots__ = ("_active", "_mine", "_others", "_ring", "_slots", "me", "size", "window")

    def __init__(self, me: str, members: Sequence[str], active: int | None = None) -> None:
        self.me = me
        self._mine = member_key(me)
        # ties (equal 64-bit scores, never in practice) go to the larger key
        self._others = tuple(member_key(holder) for holder in sorted(set(members)) if holder != me)
        self._ring = sorted((self._mine, *self._others))
        self.size = 1 + len(self._others)
        limit = ACTIVE_PER_TICK if active is None else active
        #: the window asked for (0: every member), whatever the cohort's size
        self.window = limit
        self._active = limit if limit and self.size > limit else 0
        # slot -> the other active members' keys (None: this replica is not active)
        self._slots: dict[int, tuple[int, ...] | None] = {}

    def active_others(self, slot: int) -> tuple[int, ...] | None:
        """The keys of the other members a tick of ``slot`` is ranked over; None if this
        replica is not among that slot's active members."""
        if not self._active:
            return self._others
        found = self._slots.get(slot, ())
        if found == ():
            ring = self._ring
            # a window of ``active`` members on the ring, at an offset that moves by
            # the golden ratio per second: over n seconds every member is active
            # n x active / size times, give or take one, whatever the schedule's step
            offset = (((slot // 1000) * _GOLDEN) & _MASK) * len(ring) >> 64
            window = {ring[(offset + i) % len(ring)] for i in range(self._active)}
            found = tuple(m for m in self._others if m in window) if self._mine in window else None
            if len(self._slots) > 64:  # a few recent slots are enough
                self._slots.clear()
            self._slots[slot] = found
        return found

    def place(self, name: str, slot: int) -> Place:
        """PREFERRED if this replica has the tick's highest score, BACKUP if the second,
        else OTHER."""
        others = self.active_others(slot)
        if others is None:
            return OTHER
        tick = tick_key(name, slot)
        mine = _mix(tick ^ self._mine)
        ahead = 0
        for key in others:
            theirs = _mix(tick ^ key)
            if theirs > mine or (theirs == mine and key > self._mine):
                ahead += 1
                if ahead == 2:
                    return OTHER
        return PREFERRED if ahead == 0 else BACKUP


def rendezvous_order(members: Sequence[str], name: str, slot: int) -> list[str]:
    """The members in rendezvous order for a tick, highest score first (tests, tools)."""
    tick = tick_key(name, slot)
    return sorted(
        set(members),
        key=lambda holder: (score(tick, member_key(holder)), member_key(holder)),
        reverse=True,
    )
