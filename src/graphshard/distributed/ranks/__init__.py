"""The ranks wing: starting, knowing and stopping the ranks of a run — the launcher and its fork server,
the process context (rank, world size, process group, side-channel store), the start (every rank's arrival, and
a failure before joining told to the peers), collectives with timeouts and
failure attribution, and interrupts (stop means stop).

May import from the host and transport wings.
"""
