"""How the status model's values read as text, the same in the CLI, the JSON and the page."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from cronlease._timing.schedule import zone_of

__all__ = [
    "format_duration",
    "format_time",
    "lease_text",
    "no_job_words",
    "no_replica_words",
    "zone_of",
]


def format_time(moment: datetime) -> str:
    """ISO 8601 to the millisecond, a zero offset written ``Z``: ``2025-01-31T02:00:00.000Z``.

    Recorded instants are UTC; a next fire time keeps its schedule's zone,
    the clock its cron expression is written in (``...T02:00:00.000+03:00``).
    """
    offset = moment.utcoffset()
    if offset is None:
        raise ValueError(f"a naive datetime has no place in the status: {moment!r}")
    if offset == timedelta(0):
        moment = moment.astimezone(timezone.utc)
        return moment.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"
    return moment.isoformat(timespec="milliseconds")


def format_duration(seconds: float) -> str:
    """Compact and unambiguous: ``250ms``, ``1.5s``, ``42s``, ``1m30s``, ``2h05m``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.3g}s" if seconds < 10 else f"{seconds:.0f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def lease_text(expires_in: float | None) -> str:
    """A lease as people read it: ``expires in 4.2s``, ``free`` once expired, ``-`` if none."""
    if expires_in is None:
        return "-"
    return f"expires in {format_duration(expires_in)}" if expires_in > 0 else "free"


def no_replica_words(roles: tuple[str, ...]) -> str:
    """``no live replica has role reports`` (``... has role a or b``): a task no replica
    running now can run, the same words in the CLI and on the page."""
    return f"no live replica has role {' or '.join(roles)}"


def no_job_words(job: str) -> str:
    """``no live replica offers job 'export'``: a schedule row no replica running now can
    run, the same words in the CLI and on the page."""
    return f"no live replica offers job {job!r}"
