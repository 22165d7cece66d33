"""The chunked graph format (DESIGN.md §4): metadata model, chunk readers, writer, whole-graph loader."""

from .spec import ChunkedMeta, FileSpec, read_metadata, write_metadata

__all__ = ["ChunkedMeta", "FileSpec", "read_metadata", "write_metadata"]
