"""The chunked graph format (docs/guide/out-of-core.md): metadata model, chunk readers, writer, whole-graph loader."""

from .spec import ChunkedMeta, FileSpec, read_metadata, write_metadata

__all__ = ["ChunkedMeta", "FileSpec", "read_metadata", "write_metadata"]
