"""External targets that ship with autosched (importing this registers them); ``ccompiler`` is the example
to copy when writing a new one (docs/relay_byoc.md)."""

from autosched.relay.backend.contrib import ccompiler

__all__ = ["ccompiler"]
