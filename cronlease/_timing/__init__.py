"""Schedules and the clock: when ticks fall, and how far this host may be trusted."""
