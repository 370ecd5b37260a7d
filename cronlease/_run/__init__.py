"""The tick path: fire -> stage -> check -> admit -> acquire -> run -> record -> release.

Grouped by the thread each part runs on (docs/design.md §4): ``timer``
(APScheduler's thread), ``acquisition`` (the acquirer thread), ``workers``
(worker threads and their slots, heartbeats, timeouts), ``recording`` (the
finisher thread), ``housekeeping`` (work beside the path on its own
schedule) and ``replica_log`` (what a replica says of itself); ``runner``
composes them. The engine imports no status model (``cronlease._status``).
"""
