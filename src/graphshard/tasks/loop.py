"""The training loop shared by the tasks, on the rank's device (CPU or GPU): DDP around the model (its gradient
sums: :mod:`.gradients`), Adam on its parameters, sparse Adagrad on the input embeddings, per-epoch timings and
metrics, checkpoints and resume.

``comm_s`` (gradient sums on the host + sparse embedding updates, including waiting for slower ranks) is
measured apart from ``compute_s`` (forward, backward, optimiser step: on a GPU, the device's time from events;
NCCL's sums overlap the backward pass there and count in it)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from ..device.choice import rank_device
from ..device.clock import COUNT_SYNCS, StepClock, counted_syncs
from ..distributed.ranks.collectives import all_gather_bytes, all_reduce_sum, barrier
from ..distributed.ranks.interrupt import atomic, deferred
from ..distributed.runtime.graph import DistGraph
from ..distributed.runtime.session import Session
from ..distributed.transport.liveness import doing
from ..format.config import PartitionConfig, read_config
from . import timing
from .checkpoint import (
    STAGED,
    STATE,
    TENSORS,
    check_agreement,
    load_checkpoint,
    rank_status,
    read_weights,
    run_identity,
    save_checkpoint,
)
from .checkpoint_fit import check_weights
from .checks import check_loss
from .gradients import distributed_model
from .inputs import ModelInputs
from .metrics import higher_is_better
from .options import TrainOptions
from .report import epoch_line, write_json
from .runlog import RunLog
from .schedule import lr_at

log = logging.getLogger(__name__)
notice = logging.getLogger("graphshard.notice")  # shown at the default log level

# summed over ranks, not averaged
BATCH_COUNTS = (
    "fetch_bytes",
    "colocated_rows",
    "cache_hits",
    "cache_misses",
    "cache_bytes_saved",
    "copy_bytes",
    "device_cache_asked",
    "device_cache_hits",
    "device_cache_bytes_saved",
)
# per-rank sums kept for an epoch, in this order (then the batch count): seconds (averaged), the loss, counts
_SUMS = ("wall_s", "wait_s", "sample_s", "fetch_s", "copy_s", "compute_s", "comm_s", "loss", *BATCH_COUNTS)


def open_graph(opts: TrainOptions, cfg: PartitionConfig | None = None) -> DistGraph:
    """The partitioned graph of ``opts.part_config`` (collective).

    Args:
        opts: The run's options.
        cfg: The partition config, as this process loaded it once; None: read here (once), and the loaded
            object is what the graph, its partitions and the checkpoints' identity use.

    Returns:
        The graph.
    """
    assert opts.part_config is not None  # checked by resolve_data, set by checkpoint_options
    cfg = read_config(opts.part_config) if cfg is None else cfg
    return DistGraph(cfg.graph_name, cfg, verify=opts.verify, colocated=opts.colocated)


def _agree_on_resume(s: Session, directory: str, identity: dict[str, Any]) -> None:
    """Every rank checks its own checkpoint, then all compare before anyone loads: a checkpoint of another
    run, or ranks at different epochs (or some without a checkpoint), make every rank fail at once with
    the same message naming the ranks and their epochs (no rank is left waiting at a barrier)."""
    mine = json.dumps(rank_status(directory, identity)).encode()
    statuses = [json.loads(b) for b in all_gather_bytes(s.ctx, mine, "checkpoint states")]
    check_agreement(Path(directory).parent, statuses)


def best_epoch(history: list[dict[str, Any]], metric: str) -> int | None:
    """The epoch of the best ``metric`` in ``history`` (the highest; the lowest of an error such as ``val_rmse``;
    the first of equals), or None if none was measured."""
    sign = 1.0 if higher_is_better(metric) else -1.0
    scored = [(sign * r[metric], -r["epoch"]) for r in history if r.get(metric) is not None]
    return -max(scored)[1] if scored else None


class Trainer:
    """Runs epochs of ``loss(ddp_model, batch)`` over a loader; the model and the inputs' embeddings are
    checkpointed after every epoch when ``opts.checkpoint`` is set, and resumed from it.

    Model selection: the weights (and input embeddings) of the epoch with the best validation ``metric``
    are kept (in memory, and in ``<checkpoint>/best/`` with checkpoints); :meth:`restore_best` puts them
    back. With ``opts.patience``, training stops once that many epochs passed without a better metric."""

    def __init__(
        self, s: Session, g: DistGraph, opts: TrainOptions, model: torch.nn.Module, *, inputs: ModelInputs, metric: str
    ):
        self.s, self.g, self.opts, self.inputs = s, g, opts, inputs
        self.rank_device = rank_device(opts.device)
        self.device = self.rank_device.device
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # NCCL, streams and events of this rank on its own device
        self.model = model.to(self.device)
        inputs.to(self.device)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=opts.lr, weight_decay=opts.weight_decay)
        self.start_epoch, self.metric = 0, metric
        self.history: list[dict[str, Any]] = []
        self.best: tuple[int, dict, dict] | None = None  # (epoch, model state, embedding state)
        self.runlog: RunLog | None = None
        self.identity: dict[str, Any] | None = None
        if opts.checkpoint:
            self.identity = identity = run_identity(g.config, opts, s.world_size)
            _agree_on_resume(s, self._dir(), identity)
            resumed = load_checkpoint(self._dir(), model, self.optimizer, identity)
            if resumed:
                self.start_epoch, self.history, extra = resumed
                inputs.check_state(extra, self._dir())
                inputs.load_state(extra)
                notice.info("resuming after epoch %d from %s", self.start_epoch - 1, opts.checkpoint)
                self._resume_best()
            g.barrier()  # every embedding shard is restored before anyone reads it
        # every parameter of a built-in model takes part in every step (a heterogeneous model builds only
        # what its outputs read), so DDP need not search the graph for unused ones; the user's model may
        # leave some unused (found on a trial batch, train.model_check)
        unused = any(getattr(m, "find_unused", False) for m in model.modules())
        self.comm: dict[str, Any] = {"comm_s": 0.0, "sum": None}
        self.ddp = distributed_model(s, self.model, self.rank_device, self.comm, unused=unused, timeout=opts.timeout)
        self.steps = StepClock(self.device)
        self.after_backward: Callable[[], None] | None = None  # e.g. a multi-task run's idle heads

    def _dir(self, best: bool = False) -> str:
        return f"{self.opts.checkpoint}/{'best/' if best else ''}rank{self.s.rank}"

    @property
    def best_epoch(self) -> int | None:
        return best_epoch(self.history, self.metric)

    def _resume_best(self) -> None:
        """The best epoch's weights from ``best/`` when they are those of the resumed history's best epoch
        (a ``best/`` newer than the resumed epoch belongs to an epoch that is redone, and is replaced)."""
        found = read_weights(self._dir(best=True))
        if found is not None and found[0] == self.best_epoch:
            check_weights(self._dir(best=True), found[1], self.model)  # now, not when training ends
            self.inputs.check_state(found[2], self._dir(best=True))
            self.best = found

    def _keep_best(self, epoch: int) -> None:
        """In memory; with checkpoints, ``best/`` is written with the epoch's own (see :meth:`_checkpoint`)."""
        model = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.best = (epoch, model, {k: v.clone() for k, v in self.inputs.state().items()})

    def _checkpoint(self, epoch: int) -> None:
        """Write the checkpoint of ``epoch`` (after ``best/`` when it is the best so far: a resume never finds
        best/ behind it) on every rank or on none: each rank writes its own into a staging directory, all
        meet at a barrier, then each moves its files into place. A signal meanwhile is acted on once that is
        done (or, when a peer stopped first, at the barrier, with nothing moved): a resume always finds one
        epoch on every rank."""
        staged: list[Path] = []
        try:
            with deferred():
                if self.best is not None and self.best[0] == epoch:
                    staged.append(self._stage(self._dir(best=True), epoch, self.best[2]))
                staged.append(self._stage(self._dir(), epoch, self.inputs.state()))
                barrier(self.s.ctx, f"checkpoint of epoch {epoch} staged")
                with atomic():
                    for stage in staged:
                        for name in (TENSORS, STATE):  # the state last, as save_checkpoint writes them
                            os.replace(stage / name, stage.parent / name)
        finally:
            for stage in staged:
                shutil.rmtree(stage, ignore_errors=True)

    def _stage(self, directory: str, epoch: int, extra: dict[str, torch.Tensor]) -> Path:
        """This rank's checkpoint of ``epoch`` in ``directory``'s staging directory (returned)."""
        stage = Path(directory) / STAGED
        save_checkpoint(
            stage, epoch, self.model, self.optimizer, history=self.history, extra=extra, identity=self.identity
        )
        return stage

    def restore_best(self) -> int | None:
        """Put back the best validation epoch's weights and embeddings (collective); returns that epoch
        (None: nothing was validated, or its weights are not at hand, and the last weights stay)."""
        epoch = self.best_epoch
        if epoch is None or epoch == self.history[-1]["epoch"]:
            return epoch
        if self.best is None or self.best[0] != epoch:
            log.warning(
                "the weights of the best validation epoch %d are not at hand (a checkpoint without "
                "best/); the last epoch's are used",
                epoch,
            )
            return self.history[-1]["epoch"]
        self.model.load_state_dict(self.best[1])
        self.inputs.load_state(self.best[2])
        self.g.barrier()  # every embedding shard is restored before anyone reads it
        return epoch

    def fit(
        self,
        loader: Any,
        loss: Callable[[torch.nn.Module, Any], torch.Tensor],
        evaluate: Callable[[], Mapping[str, float | None]],
    ) -> list[dict[str, Any]]:
        """Train from the resumed epoch to ``opts.epochs``; ``evaluate()`` adds validation metrics after
        every ``opts.eval_every``-th epoch and after the last."""
        loader.epoch = self.start_epoch
        timing.training_starts()
        self.runlog = RunLog(self.opts.log_dir, self.start_epoch) if self.opts.log_dir and self.s.rank == 0 else None
        with loader:
            for epoch in range(self.start_epoch, self.opts.epochs):
                with timing.phase("epochs_s"):
                    record = self._epoch(loader, loss, epoch)
                every = self.opts.eval_every
                if epoch == self.opts.epochs - 1 or (every and (epoch + 1) % every == 0):
                    doing(f"validating after epoch {epoch}")
                    with timing.phase("evaluation_s"):
                        record.update(evaluate())
                self.history.append(record)
                stop = self._select(record)
                self._report(record)
                if stop:  # after the epoch's line, which it follows from
                    notice.info(stop)
                if self.opts.checkpoint:
                    doing(f"writing the checkpoint of epoch {epoch}")
                    with timing.phase("checkpoint_s"):
                        self._checkpoint(epoch)
                if stop:
                    break
        return self.history

    def _select(self, record: dict[str, Any]) -> str | None:
        """Keep the weights if ``record`` is the best validation so far; if patience has run out, why training
        stops (else None). Every rank decides alike (the validation figures are summed over ranks)."""
        best = self.best_epoch
        if best is not None and record.get(self.metric) is not None and best == record["epoch"]:
            with timing.phase("checkpoint_s") if self.opts.checkpoint else nullcontext():  # in memory: "other"
                self._keep_best(best)
        patience = self.opts.patience
        if not patience or best is None or record.get(self.metric) is None or record["epoch"] - best < patience:
            return None
        record["stopped_early"] = True
        value = next(r[self.metric] for r in self.history if r["epoch"] == best)
        return (
            f"stopping early after epoch {record['epoch']}: {self.metric} has not improved on epoch {best}'s "
            f"{value:.4f} for {patience} epoch{'s' if patience > 1 else ''} (--patience)"
        )

    def final_test(self, test: Callable[[], Mapping[str, float | None]], changed: Callable[[], None]) -> dict[str, Any]:
        """Test at the best validation epoch (collective): ``test()`` gives the test figures of the current
        weights, ``changed()`` says the weights changed. Returns ``best_epoch``, that epoch's ``val_*`` and
        ``test_*`` figures, and when the last epoch is another one, its figures under ``last_epoch``."""
        last = self.history[-1]
        out: dict[str, Any] = {}
        doing("testing")
        with timing.phase("evaluation_s"):
            chosen = self.best_epoch
            if chosen is not None and chosen != last["epoch"]:
                out["last_epoch"] = {
                    "epoch": last["epoch"],
                    **_prefixed(last, "val_", "val_"),
                    **_prefixed(test(), "", "test_"),
                }
                chosen = self.restore_best()
                changed()
            chosen = last["epoch"] if chosen is None else chosen
            result = test()
        record = next(r for r in self.history if r["epoch"] == chosen)
        out |= {"best_epoch": chosen, **_prefixed(record, "val_", "val_"), **_prefixed(result, "", "test_")}
        out["start_epoch"] = self.start_epoch  # the first epoch this run trained (> 0: resumed from a checkpoint)
        if self.runlog is not None:
            self.runlog.close({f"test/{k}": v for k, v in result.items() if v is not None}, chosen)
        return out

    def _report(self, record: dict[str, Any]) -> None:
        """Rank 0 shows the epoch as it ends and rewrites the metrics file with the history so far."""
        log.info("epoch %d: %s", record["epoch"], record)
        if self.s.rank != 0:
            return
        if self.opts.metrics_out:  # before the line: whoever sees the line finds the epoch in the file
            write_json(self.opts.metrics_out, {"complete": False, "epochs": self.history})
        if self.runlog is not None:
            self.runlog.epoch(record, self.history)
        if self.opts.print_epochs:
            print(epoch_line(record), flush=True)

    def _epoch(self, loader: Any, loss_fn: Callable, epoch: int) -> dict[str, Any]:
        o = self.opts
        lr = lr_at(o.lr_schedule, o.lr, epoch, o.epochs, step=o.lr_step, gamma=o.lr_gamma)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.ddp.train()
        sums = dict.fromkeys(_SUMS, 0.0)
        self.comm["comm_s"] = 0.0
        start = time.perf_counter()
        feeder = getattr(loader, "feeder", None)
        if feeder is not None:
            feeder.reset()
        with counted_syncs(self.device) as syncs:
            self._steps(loader, loss_fn, epoch, sums, start=start)
            sums["compute_s"], losses = self.steps.collect()
        self._check_losses(losses, epoch)
        sums["loss"] = float(losses.sum())
        self._settle(loader, sums)
        sums["wall_s"] = time.perf_counter() - start
        sums["comm_s"] = self.comm["comm_s"]
        if not self.steps.cuda:  # the host's step time includes its sums; a GPU's events time the device alone
            sums["compute_s"] -= sums["comm_s"]
        total = dict(
            zip(
                [*_SUMS, "batches"],
                all_reduce_sum(self.s.ctx, np.array([sums[k] for k in _SUMS] + [len(loader)]), "epoch metrics"),
            )
        )
        ranks = self.s.world_size
        out: dict[str, Any] = {"epoch": epoch, "lr": lr, "background": bool(getattr(loader, "background", False))}
        out.update({k: float(v) / ranks for k, v in total.items() if k.endswith("_s")})
        out["train_loss"] = float(total["loss"] / total["batches"])
        out.update({k: int(total[k]) for k in BATCH_COUNTS})
        out["batches"] = int(total["batches"] / ranks)
        if os.environ.get(COUNT_SYNCS) == "1" and self.steps.cuda:
            out["device_syncs"] = syncs[0]  # this rank's (rank 0's in the record)
        return out

    def _steps(self, loader: Any, loss_fn: Callable, epoch: int, sums: dict[str, float], *, start: float) -> None:
        """The epoch's steps over ``loader``, adding the batches' sampling, fetch and counts to ``sums``."""
        bar = tqdm(
            total=len(loader),
            desc=f"epoch {epoch}",
            leave=False,
            disable=None if self.opts.progress and self.s.rank == 0 else True,
        )  # None: on a terminal only
        autocast = torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.opts.precision == "bf16-mixed")
        host_checks = not self.opts.allow_nonfinite and not self.steps.cuda  # on a GPU: read at the epoch's end
        done = start
        for step, batch in enumerate(loader):
            doing(f"training epoch {epoch}, batch {step}")
            sums["wait_s"] += time.perf_counter() - done  # waiting for the batch (built while the model computes)
            self.steps.start()
            self.optimizer.zero_grad()
            with autocast:
                loss = loss_fn(self.ddp, batch)
            if host_checks:
                check_loss(loss, epoch, step, self.s.rank)
            loss.backward()  # the comm hook all-reduces gradients here
            if self.after_backward is not None:
                self.after_backward()
            self.optimizer.step()
            t_sparse = time.perf_counter()
            self.inputs.step()
            self.comm["comm_s"] += time.perf_counter() - t_sparse
            self.steps.stop(loss)
            sums["sample_s"] += batch.sample_time
            sums["fetch_s"] += batch.fetch_time
            for k in BATCH_COUNTS:
                sums[k] += getattr(batch, k, 0)
            if not self.steps.cuda:  # the progress bar's loss: on a CPU it costs nothing to read
                bar.set_postfix(loss=f"{loss.item():.4f}", refresh=False)
            bar.update()
            done = time.perf_counter()
        bar.close()

    def _settle(self, loader: Any, sums: dict[str, float]) -> None:
        """After the steps: the loader's copies and waits, the device cache's counts, the last gradient sums."""
        feeder = getattr(loader, "feeder", None)
        if feeder is not None:  # the loader's own account: its wait for batches, apart from the copies
            sums["copy_s"], sums["wait_s"], sums["copy_bytes"] = feeder.reset()
        if getattr(loader, "device_cache", None) is not None:
            counted = loader.device_cache.counts.take()
            sums["device_cache_asked"], sums["device_cache_hits"], sums["device_cache_bytes_saved"] = counted
        if self.comm["sum"] is not None:
            t = time.perf_counter()
            self.comm["sum"].settle()  # the last step's gradients reached every peer
            self.comm["comm_s"] += time.perf_counter() - t

    def _check_losses(self, losses: torch.Tensor, epoch: int) -> None:
        """On a GPU, the epoch's losses are read here, once: a non-finite one stops the run naming its step."""
        if self.opts.allow_nonfinite or not self.steps.cuda:
            return
        bad = torch.nonzero(~torch.isfinite(losses))
        if bad.numel():
            step = int(bad[0, 0])
            check_loss(losses[step], epoch, step, self.s.rank)


def _prefixed(d: Mapping[str, Any], having: str, prefix: str) -> dict[str, Any]:
    """The entries of ``d`` whose key starts with ``having``, renamed to start with ``prefix`` instead."""
    return {prefix + k[len(having) :]: v for k, v in d.items() if k.startswith(having)}
