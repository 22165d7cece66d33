"""The planner (``graphshard plan``): the predicted peak memory and peak disk of each pipeline step (where the disk
lands and the free space there), as tables or JSON. Each step owns its cost model and applies its own memory and
disk checks; this package only reports them:
:mod:`graphshard.partition.cost`, :mod:`graphshard.pipeline.assign_cost`, :mod:`graphshard.pipeline.dispatch.cost`
and :mod:`graphshard.train.cost`, with the shared arithmetic in :mod:`graphshard.memory` and :mod:`graphshard.disk`."""

from ..chunked.counts import GraphCounts
from ..disk import DiskNeed, check_disk, free_space
from ..memory import Estimate, allowed, gib, machine_memory, parse_size
from ..pipeline.assign_cost import assign_disk, check_fits, choose, estimates
from .report import plan_data, plan_report

__all__ = [
    "DiskNeed",
    "Estimate",
    "GraphCounts",
    "allowed",
    "assign_disk",
    "check_disk",
    "check_fits",
    "choose",
    "estimates",
    "free_space",
    "gib",
    "machine_memory",
    "parse_size",
    "plan_data",
    "plan_report",
]
