"""graphshard: partition graphs for distributed GNN training, and train on the partitions."""

from .book import RangePartitionBook
from .errors import FormatError, GraphshardError, IDRangeError, InputError
from .format.load import Partition, PartitionGraph, load_partition, load_partition_book, load_partition_feats
from .graph import Graph
from .ids import IDConverter
from .partition.api import partition_graph

__all__ = [
    "FormatError", "Graph", "GraphshardError", "IDConverter", "IDRangeError", "InputError", "Partition",
    "PartitionGraph", "RangePartitionBook", "load_partition", "load_partition_book", "load_partition_feats",
    "partition_graph",
]
__version__ = "0.1.0"
