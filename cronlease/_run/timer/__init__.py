"""The timer: APScheduler fires ticks (its own thread) and hands them to the acquirer;
the values every stage passes on (docs/design.md §4.1)."""
