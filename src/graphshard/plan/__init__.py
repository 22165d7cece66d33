"""The memory planner (``graphshard plan``): the predicted peak memory and disk of each pipeline step, as
tables. Each step owns its cost model and applies its own memory check; this package only reports them:
:mod:`graphshard.partition.cost`, :mod:`graphshard.pipeline.assign_cost`, :mod:`graphshard.pipeline.dispatch.cost`
and :mod:`graphshard.train.cost`, with the shared arithmetic in :mod:`graphshard.memory`."""

from ..chunked.counts import GraphCounts
from ..memory import Estimate, allowed, gib, machine_memory, parse_size
from ..pipeline.assign_cost import check_fits, choose, estimates
from .report import table

__all__ = [
    "Estimate",
    "GraphCounts",
    "allowed",
    "check_fits",
    "choose",
    "estimates",
    "gib",
    "machine_memory",
    "parse_size",
    "table",
]
