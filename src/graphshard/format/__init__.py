"""The partition format (version 1): writing, reading, checksums and validation — see docs/format.md."""
