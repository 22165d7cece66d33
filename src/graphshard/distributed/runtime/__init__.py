"""The runtime wing: what users call — ``DistGraph`` (runtime.graph), the work split (split), original to new
IDs (original) and one call to join a run (session). Users import these names from
:mod:`graphshard.distributed`, not from here.

May import from every wing below it: host, stores, transport, ranks, groups, remote.
"""
