"""What a replica says of itself: its log lines (runs, outages, failing tasks, once per
streak) and the pulse health() reads (docs/design.md §4.4, §4.8, §5.18, §5.21)."""
