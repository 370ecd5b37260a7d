"""The package version, in a module of its own so that the CLI can read it without
importing the public face (which imports the CLI's dependencies)."""

__version__ = "0.1.0"
