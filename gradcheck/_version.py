"""The package version (one place: the facade and the environment record read it)."""

__version__ = "0.1.0"
