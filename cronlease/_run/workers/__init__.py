"""Won runs on their way to a result: the worker threads and their slots, the runs in
progress with their heartbeats, the task called, timeouts (docs/design.md §4.3,
§4.5-§4.7)."""
