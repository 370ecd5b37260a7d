"""Schedules kept in the database: jobs, rows made tasks, the model (docs/design.md §5.37)."""
