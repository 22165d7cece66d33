"""Step 2 of the out-of-core pipeline: dispatch a chunked graph to ranks and write format v1.

Runs as W ranks on ``torch.distributed`` (gloo). Partition ``p`` is owned by rank ``p % W``. Each rank
reads a contiguous share of every chunk list, sends edges (with their features) to the owner of their
destination and node features to the owner of their node, relabels exactly as ``partition_graph``
does, fetches HALO in-edges from their owners hop by hop, and writes its partitions. The output is
byte-identical to ``partition_graph`` with the same assignment (only ``part_method`` may differ).

Every rank holds the node assignment and the node renumbering (O(N) integers), its share of the
input, and its own partitions' data — never the whole graph.

Resumable: finished partitions are kept in ``<out>/.dispatch-<graph>/`` with a marker recording
their checksums and a fingerprint of the inputs and options; a re-run verifies and reuses them.
The config JSON is written last, once every rank has published its partitions.

The steps, one module each, in pipeline order: :mod:`.state` (options, assignment, renumbering,
ownership), :mod:`.plan` (pieces and edge counts), :mod:`.edge_exchange` and :mod:`.node_exchange`
(data to the owning ranks), :mod:`.halo` (own and HALO in-edges), :mod:`.write` (part files),
:mod:`.resume` (fingerprint and reuse), :mod:`.publish` (config, validation, publication), driven by
:mod:`.run`; :mod:`.read` reads the input chunks.
"""

from .run import dispatch, run_dispatch
from .state import DispatchOptions

__all__ = ["DispatchOptions", "dispatch", "run_dispatch"]
