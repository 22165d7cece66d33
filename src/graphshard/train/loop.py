"""The training loop shared by the tasks: DDP (gloo) around the model, Adam on its parameters, sparse
Adagrad on the input embeddings, per-epoch timings and metrics, checkpoints and resume.

Gradient all-reduce runs through a communication hook that waits for each bucket's all-reduce and
times it, so ``comm_s`` (all-reduce + sparse embedding updates, including waiting for slower ranks)
is measured apart from ``compute_s`` (forward, backward, optimiser step)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from tqdm import tqdm

from ..distributed.collectives import all_gather_bytes, all_reduce_sum
from ..distributed.graph import DistGraph
from ..distributed.runtime import Session
from . import timing
from .checks import check_loss
from .checkpoint import check_agreement, load_checkpoint, rank_status, run_identity, save_checkpoint
from .inputs import ModelInputs
from .options import TrainOptions
from .report import epoch_line, write_json
from .schedule import lr_at

log = logging.getLogger(__name__)
notice = logging.getLogger("graphshard.notice")  # shown at the default log level

# per-rank sums kept for an epoch, in this order (then the batch count)
_SUMS = ("wall_s", "wait_s", "sample_s", "fetch_s", "compute_s", "comm_s", "loss", "fetch_bytes", "cache_hits", "cache_misses",
         "cache_bytes_saved")
_COUNTS = ("fetch_bytes", "cache_hits", "cache_misses", "cache_bytes_saved")  # summed over ranks, not averaged


def graph_name(part_config: str) -> str:
    from ..format.config import read_config

    return read_config(part_config).graph_name


def _timed_allreduce(state, bucket):  # no annotations: DDP checks them against its own types
    start = time.perf_counter()
    grads = bucket.buffer().div_(dist.get_world_size())
    dist.all_reduce(grads)
    state["comm_s"] += time.perf_counter() - start
    fut: torch.futures.Future = torch.futures.Future()
    fut.set_result(grads)
    return fut


def _agree_on_resume(s: Session, directory: str, identity: dict[str, Any]) -> None:
    """Every rank checks its own checkpoint, then all compare before anyone loads: a checkpoint of another
    run, or ranks at different epochs (or some without a checkpoint), make every rank fail at once with
    the same message naming the ranks and their epochs (no rank is left waiting at a barrier)."""
    mine = json.dumps(rank_status(directory, identity)).encode()
    statuses = [json.loads(b) for b in all_gather_bytes(s.ctx, mine, "checkpoint states")]
    check_agreement(Path(directory).parent, statuses)


class Trainer:
    """Runs epochs of ``loss(ddp_model, batch)`` over a loader; the model and the inputs' embeddings are
    checkpointed after every epoch when ``opts.checkpoint`` is set, and resumed from it."""

    def __init__(self, s: Session, g: DistGraph, opts: TrainOptions, model: torch.nn.Module,
                 inputs: ModelInputs):
        from torch.nn.parallel import DistributedDataParallel

        self.s, self.g, self.opts, self.inputs = s, g, opts, inputs
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=opts.lr, weight_decay=opts.weight_decay)
        self.start_epoch, self.history = 0, []
        self.identity = run_identity(opts.part_config, opts, s.world_size) if opts.checkpoint else None
        if opts.checkpoint:
            _agree_on_resume(s, self._dir(), self.identity)
            resumed = load_checkpoint(self._dir(), model, self.optimizer, self.identity)
            if resumed:
                self.start_epoch, self.history, extra = resumed
                inputs.load_state(extra)
                notice.info("resuming after epoch %d from %s", self.start_epoch, opts.checkpoint)
            g.barrier()  # every embedding shard is restored before anyone reads it
        # a heterogeneous model's loss reads one node type: the relations feeding other types in the
        # last layers get no gradient, which DDP must be told to expect
        self.ddp = DistributedDataParallel(model, find_unused_parameters=inputs.hetero and opts.model == "sage")
        self.comm = {"comm_s": 0.0}
        self.ddp.register_comm_hook(self.comm, _timed_allreduce)

    def _dir(self) -> str:
        return f"{self.opts.checkpoint}/rank{self.s.rank}"

    def fit(self, loader: Any, loss: Callable[[torch.nn.Module, Any], torch.Tensor],
            evaluate: Callable[[], dict[str, float]]) -> list[dict[str, Any]]:
        """Train from the resumed epoch to ``opts.epochs``; ``evaluate()`` adds validation metrics after
        every ``opts.eval_every``-th epoch and after the last."""
        loader.epoch = self.start_epoch
        timing.training_starts()
        with loader:
            for epoch in range(self.start_epoch, self.opts.epochs):
                with timing.phase("epochs_s"):
                    record = self._epoch(loader, loss, epoch)
                every = self.opts.eval_every
                if epoch == self.opts.epochs - 1 or (every and (epoch + 1) % every == 0):
                    with timing.phase("evaluation_s"):
                        record.update(evaluate())
                self.history.append(record)
                self._report(record)
                if self.opts.checkpoint:
                    with timing.phase("checkpoint_s"):
                        save_checkpoint(self._dir(), epoch, self.model, self.optimizer, self.history,
                                        self.inputs.state(), self.identity)
        return self.history

    def _report(self, record: dict[str, Any]) -> None:
        """Rank 0 shows the epoch as it ends and rewrites the metrics file with the history so far."""
        log.info("epoch %d: %s", record["epoch"], record)
        if self.s.rank != 0:
            return
        if self.opts.metrics_out:  # before the line: whoever sees the line finds the epoch in the file
            write_json(self.opts.metrics_out, {"complete": False, "epochs": self.history})
        if self.opts.print_epochs:
            print(epoch_line(record), flush=True)

    def _epoch(self, loader: Any, loss_fn: Callable, epoch: int) -> dict[str, Any]:
        o = self.opts
        lr = lr_at(o.lr_schedule, o.lr, epoch, o.epochs, o.lr_step, o.lr_gamma)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.ddp.train()
        sums = dict.fromkeys(_SUMS, 0.0)
        self.comm["comm_s"] = 0.0
        start = time.perf_counter()
        bar = tqdm(total=len(loader), desc=f"epoch {epoch}", leave=False,
                   disable=not (self.opts.progress and self.s.rank == 0))
        done = start
        for step, batch in enumerate(loader):
            t = time.perf_counter()
            sums["wait_s"] += t - done  # waiting for the batch (its sampling and fetching overlap compute)
            self.optimizer.zero_grad()
            loss = loss_fn(self.ddp, batch)
            if not self.opts.allow_nonfinite:
                check_loss(loss, epoch, step, self.s.rank)
            loss.backward()  # the comm hook all-reduces gradients here
            self.optimizer.step()
            t_sparse = time.perf_counter()
            self.inputs.step()
            self.comm["comm_s"] += time.perf_counter() - t_sparse
            sums["compute_s"] += time.perf_counter() - t
            sums["sample_s"] += batch.sample_time
            sums["fetch_s"] += batch.fetch_time
            for k in _COUNTS:
                sums[k] += getattr(batch, k, 0)
            sums["loss"] += loss.item()
            bar.set_postfix(loss=f"{sums['loss'] / (step + 1):.4f}", refresh=False)
            bar.update()
            done = time.perf_counter()
        bar.close()
        sums["wall_s"] = time.perf_counter() - start
        sums["comm_s"] = self.comm["comm_s"]
        sums["compute_s"] -= sums["comm_s"]
        total = dict(zip([*_SUMS, "batches"], all_reduce_sum(
            self.s.ctx, np.array([sums[k] for k in _SUMS] + [len(loader)]), "epoch metrics")))
        ranks = self.s.world_size
        out: dict[str, Any] = {"epoch": epoch, "lr": lr, "background": bool(getattr(loader, "background", False))}
        out.update({k: float(v) / ranks for k, v in total.items() if k.endswith("_s")})
        out["train_loss"] = float(total["loss"] / total["batches"])
        out.update({k: int(total[k]) for k in _COUNTS})
        out["batches"] = int(total["batches"] / ranks)
        return out
