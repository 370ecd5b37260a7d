"""Outcomes written and leases released, in groups, on the finisher thread; the
policy of a slot's further attempts (docs/design.md §4.8, §4.11)."""
