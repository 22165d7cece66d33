"""What is learnt and how, below both ``train`` and ``serve``: a run's options (``TrainOptions``), the tasks
(node, edge and link prediction, several at once) with their labels, losses, negatives and metrics, the model
inputs, the per-rank loop, checkpoints, every node's output, and restoring a run from its checkpoint
(``restore``), which ``graphshard embed`` and ``graphshard serve`` both start from.

The commands that start runs (``graphshard train``, ``graphshard embed``) live in :mod:`graphshard.train`,
``graphshard serve`` in :mod:`graphshard.serve`; both sit above this package and neither imports the other.
"""
