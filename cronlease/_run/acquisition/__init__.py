"""The acquirer thread: which ticks this replica tries and when (membership,
rendezvous, staging), the per-tick checks, and the leases in one store call
(docs/design.md §4.2-§4.4)."""
