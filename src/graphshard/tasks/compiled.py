"""The compiled kernels a rank runs — sampling, the partition book's owner look-up, row gathers and
placements, fused dropout — compiled by the process that starts the ranks, before it starts them: each rank
then loads them from numba's disk cache instead of compiling the same kernels as its peers, all at once on
the same cores. Every command that starts ranks (``train``, ``embed``, ``serve``, ``launch``) calls
:func:`warm_up`, so a kernel added to the runtime is warmed for all of them in one place."""

from __future__ import annotations

from ..distributed.stores.rows import warm_up as warm_rows
from ..models.dropout import warm_up as warm_dropout
from ..sampling.kernels import warm_up as warm_sampling


def warm_up() -> None:
    """Compile every kernel of the runtime for the types ranks pass (or load them from the cache). The first
    run on a machine compiles (seconds, announced once); later runs load them (a fraction of a second)."""
    warm_sampling()  # with the partition book's owner look-up and DistGraph's degree kernels
    warm_rows()
    warm_dropout()
