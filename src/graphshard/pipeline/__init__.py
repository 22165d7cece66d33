"""Out-of-core / multi-machine partitioning: assignment step, dispatch step, ParMETIS interop."""
