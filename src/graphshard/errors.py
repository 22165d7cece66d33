"""Exception types raised by graphshard. Every message names the file, key or ID at fault."""

from __future__ import annotations


class GraphshardError(Exception):
    """Base class of every error graphshard raises on purpose."""


class InputError(GraphshardError, ValueError):
    """A graph, option or argument given by the user is invalid."""


class IDRangeError(InputError, IndexError):
    """An ID lies outside the range of IDs it is meant to address."""


class FormatError(GraphshardError, ValueError):
    """A file on disk does not follow the format it claims (missing, truncated, corrupt, inconsistent)."""


class WriteError(GraphshardError, OSError):
    """An output could not be written (no space left on the device, no permission, ...); names the path."""


class DistError(RuntimeError):
    """A distributed step failed; the message names the rank at fault where it is known."""


class DeviceMemoryError(GraphshardError, MemoryError):
    """A device (GPU) ran out of memory; names the rank, the device, the phase and what to lower."""
