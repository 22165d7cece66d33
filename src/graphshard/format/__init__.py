"""The partition format (version 1): writing, reading, checksums and validation — DESIGN.md §3."""
