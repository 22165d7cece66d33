"""The host wing: what one process is and may use on its machine — who this rank is (environment), the
``GRAPHSHARD_*`` settings, the CPU budget (threads), counters shared by threads, other processes seen
through ``/proc``, and processes that never outlive their starter (lifetime).

Imports nothing from the other wings of :mod:`graphshard.distributed`.
"""
