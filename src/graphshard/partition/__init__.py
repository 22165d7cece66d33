"""In-memory partitioning: assignment, relabelling, HALO construction, partition building."""
