"""The version of autosched, in one place below every layer: the facade re-exports it, and tuning records and
the measurement's compile cache key stamp it without importing the facade."""

__version__ = "0.1.0"
