"""Work beside the tick path, each on its own schedule: history pruning, the stuck
watcher, the attempt poll, the clock check (docs/design.md §4.11, §5.10, §5.12)."""
