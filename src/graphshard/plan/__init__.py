"""Memory planner: predicted peak memory and disk of each pipeline step (``graphshard plan``), and the
checks that refuse a step predicted not to fit before it starts. One module per step:
:mod:`~graphshard.plan.assign` (assignment methods on chunked input), :mod:`~graphshard.plan.dispatch`
and :mod:`~graphshard.plan.train` (per process)."""

from .assign import choose, estimates
from .budget import allowed, check_fits, gib, machine_memory, parse_size, table
from .counts import GraphCounts
from .estimate import Estimate

__all__ = ["Estimate", "GraphCounts", "allowed", "check_fits", "choose", "estimates", "gib", "machine_memory",
           "parse_size", "table"]
