"""An installed app of the recipe test: its tasks.py declares the ledger task."""
