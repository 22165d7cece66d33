"""Entry point: train on a partition config (or a dataset, partitioned first) on a local cluster of
``num_procs`` processes, or as one rank of a ``torchrun`` job."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from ..datasets import load_dataset
from ..device.choice import check_device, local_ranks, rank_device, rule_line
from ..device.memory import named_out_of_memory
from ..distributed.host.environment import adopt_launcher_env
from ..distributed.host.lifetime import refuse_spawn_reimport
from ..distributed.ranks.launcher import launch
from ..distributed.runtime.session import session
from ..distributed.transport.liveness import now_doing
from ..fingerprint import tree_fingerprint
from ..format.config import PartitionConfig, read_config
from ..format.outputs import prepare_output_dir
from ..graph import parse_etype, with_reverse_edges
from ..memory import allowed
from ..models.registry import is_custom, load_factory
from ..partition.api import partition_graph
from ..partition.cost import check_partition_fits
from ..tasks import timing
from ..tasks.checkpoint import check_checkpoints, run_identity
from ..tasks.compiled import warm_up
from ..tasks.edge import train_edge
from ..tasks.embeddings import check_embeddings_target
from ..tasks.link import train_link
from ..tasks.link_split import save_link_split, split_edges
from ..tasks.metrics import load_library
from ..tasks.multi import train_multi
from ..tasks.multitask import link_part
from ..tasks.node import train_node
from ..tasks.options import TrainOptions
from ..tasks.report import write_json
from ..tasks.runlog import KIND, check_log_dir
from .contract import resolve_data
from .cost import check_train_fits, evaluated
from .device_cost import check_devices_fit

log = logging.getLogger(__name__)
notice = logging.getLogger("graphshard.notice")  # shown at the default log level


# partition_dataset's arguments: dataset, out_dir, num_parts, method, seed, link, edge_type
class PartitionJob(NamedTuple):
    """The arguments of :func:`partition_dataset` for a ``--dataset`` run."""

    dataset: str
    out_dir: str
    num_parts: int
    method: str
    seed: int
    link: bool
    edge_type: str | None


def _rank_main(
    opts: TrainOptions,
    result_path: str | None,
    dataset: PartitionJob | None = None,
    log_level: int | None = None,
    launched_at: float | None = None,
    *,
    cfg: PartitionConfig | None = None,
) -> dict[str, Any]:
    """One rank. ``dataset``: ``partition_dataset`` arguments, run by the first process of each host
    (``LOCAL_RANK`` 0) while the others wait at a barrier (torchrun with ``--dataset``). ``log_level``: the
    launching process's (``graphshard -v``); default: this process's. ``launched_at``: the launcher's
    ``time.time()`` when it began preparing the processes (for the time account). ``cfg``: the partition
    config this process already loaded (a rank that is its own launcher, under torchrun)."""
    timing.reset()
    spawn_s = time.time() - launched_at if launched_at is not None else None
    rank = os.environ.get("RANK", "0")
    level = logging.getLogger().getEffectiveLevel() if log_level is None else log_level
    logging.basicConfig(level=level, format=_rank_format(rank), force=True)
    if level > logging.INFO:  # rank 0's notices (not every rank's), shown as the launcher shows its own
        logging.getLogger().handlers[0].setFormatter(_NoticeFormatter(_rank_format(rank)))
        if rank == "0":
            notice.setLevel(logging.INFO)
    with session(timeout=opts.timeout, heartbeat_timeout=opts.heartbeat_timeout) as s:
        if opts.log_dir:
            rank_log(s, opts.log_dir)
        # read once in this process: given, here with a dataset, or else by open_graph
        if dataset is not None:
            start = time.perf_counter()
            if os.environ.get("LOCAL_RANK", "0") == "0":
                _partition_announced(dataset, announce=s.rank == 0)
            s.group.barrier("dataset partitioned on every host")
            opts = _with_partitions(opts, dataset)
            assert opts.part_config is not None  # the partitions just made or found
            cfg = read_config(opts.part_config)
            opts = resolve_data(opts, s.world_size, announce=s.rank == 0, cfg=cfg)
            timing.add("partition_s", time.perf_counter() - start)
        device = rank_device(opts.device).device
        if opts.task != "link":  # its metrics are its own sums
            load_library()
        with named_out_of_memory(s.rank, device, now_doing):
            trainer = {"link": train_link, "edge": train_edge, "node": train_node, "multi": train_multi}[opts.task]
            metrics = trainer(s, opts, cfg)
        assert opts.part_config is not None  # checked by resolve_data
        metrics["part_config"] = str(Path(opts.part_config).resolve())  # what embed (or another run) needs
        metrics["time"] = timing.rank_account() | ({"spawn_s": spawn_s} if spawn_s is not None else {})
        metrics["time"]["finished_at"] = time.time()
        if s.rank == 0 and result_path:
            write_json(result_path, metrics)
    return metrics


def _rank_format(rank: str) -> str:
    return f"%(asctime)s [rank {rank}] %(levelname)s %(name)s: %(message)s"


class _NoticeFormatter(logging.Formatter):
    """A rank's terminal: notices (resuming, stopping early, ...) as the command line shows its own
    (``graphshard: message``); other records with their time, rank and level."""

    def format(self, record: logging.LogRecord) -> str:
        if record.name == notice.name and record.levelno < logging.WARNING:
            return f"graphshard: {record.getMessage()}"
        return super().format(record)


def rank_log(s: Any, directory: str) -> None:
    """Every rank also logs at INFO level (each epoch's full record, phases, notices) to
    ``directory/rank<r>.log``, appended with a line marking the run's start; the terminal keeps its level."""
    if s.rank == 0:
        prepare_output_dir(directory, KIND)  # before any rank adds its file to it
    s.group.barrier("run log directory ready")
    root, shown = logging.getLogger(), logging.getLogger().level
    for h in root.handlers:  # the terminal shows what it showed before, rank 0's notices included
        h.addFilter(lambda r: r.levelno >= shown or (s.rank == 0 and r.name == "graphshard.notice"))
    handler = logging.FileHandler(Path(directory) / f"rank{s.rank}.log")
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter(_rank_format(str(s.rank))))  # every record with its time and rank
    root.addHandler(handler)
    root.setLevel(min(root.level, logging.INFO))
    log.info("run started (rank %d of %d)", s.rank, s.world_size)


def _paths(
    dataset: str, out_dir: str, num_parts: int, method: str, *, seed: int, link: bool, edge_type: str | None
) -> tuple[Path, Path, str | None]:
    """Where :func:`partition_dataset` puts ``dataset``: (directory, config, held-out edges file).

    The directory is keyed by the dataset's content (see :mod:`graphshard.fingerprint`) and every option
    that shapes the partitions, so a different dataset of the same name, a changed one, or other options
    never reuse partitions made for another."""
    root = Path(dataset).resolve()
    name = "".join(c if c.isalnum() else "_" for c in root.name)
    key = tree_fingerprint(root, json.dumps([num_parts, method, seed, link, edge_type]))[:12]
    out = Path(out_dir) / f"{name}-{key}" / ("link" if link else "node")
    return out, out / f"{name}.json", str(out / "link_split.safetensors") if link else None


def _with_partitions(opts: TrainOptions, job: PartitionJob) -> TrainOptions:
    """``opts`` on the partitions :func:`partition_dataset` made (or found) for ``job``, its arguments."""
    _, config, split = _paths(**job._asdict())
    return replace(opts, part_config=str(config), link_split=split or opts.link_split)


def _partition_announced(job: PartitionJob, announce: bool = True, memory: int | str | None = None) -> str:
    """:func:`partition_dataset` of ``job`` (its arguments); ``announce``: say in a notice where the partitions
    are (what ``graphshard embed --part-config`` needs), made now or reused; ``memory``: what partitioning may
    use (default: the machine's memory). Returns the partition config."""
    made = not _paths(**job._asdict())[1].is_file()
    config, _ = partition_dataset(**job._asdict(), memory=memory)
    if announce:
        notice.info(
            "partitions of %s: %s (%s; give it as --part-config to embed, or to train without partitioning again)",
            job[0],
            config,
            "made now" if made else "made by an earlier run, reused",
        )
    return config


def partition_dataset(
    dataset: str,
    out_dir: str,
    num_parts: int,
    method: str = "metis",
    *,
    seed: int = 0,
    link: bool = False,
    edge_type: str | None = None,
    memory: int | str | None = None,
) -> tuple[str, str | None]:
    """Partition a dataset directory (shared-data layout) unless ``out_dir`` holds it already; returns the
    partition config and, with ``link``, the held-out edges file. Heterogeneous graphs get reverse edge
    types (see :func:`graphshard.graph.with_reverse_edges`) so messages flow both ways; with ``link`` the
    validation/test edges (of ``edge_type``, ``"src:rel:dst"``; needed when there are several) leave the
    graph before it is partitioned. ``memory``: what partitioning may use (see
    :func:`~graphshard.partition.api.partition_graph`)."""
    out, config, split_file = _paths(dataset, out_dir, num_parts, method, seed=seed, link=link, edge_type=edge_type)
    if not config.is_file():
        ds = load_dataset(dataset)
        g = ds.graph
        if link:
            g, held_out = split_edges(g, parse_etype(edge_type) if edge_type else None, seed=seed)
            prepare_output_dir(out, "partitions")  # the held-out edges live beside the partitions they belong to
            assert split_file is not None  # _paths names it for a link run
            save_link_split(held_out, split_file)
        if not g.is_homogeneous:
            g = with_reverse_edges(g)
        partition_graph(
            g,
            config.stem,
            num_parts,
            out,
            part_method=method,
            seed=seed,
            num_classes=None if link else _declared_classes(dataset),
            memory=memory,
        )
    return str(config), split_file


def _declared_classes(dataset: str) -> int | None:
    """``num_classes`` from a dataset's meta.json, if it declares one."""
    try:
        value = json.loads((Path(dataset) / "meta.json").read_text()).get("num_classes")
    except (OSError, ValueError, AttributeError):
        return None  # load_dataset reports the problem with the file when it reads it
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def train(
    opts: TrainOptions,
    num_procs: int | None = None,
    dataset: str | None = None,
    work_dir: str = "out/train",
    *,
    part_method: str = "metis",
    host: str = "127.0.0.1",
    memory: int = 0,
) -> dict[str, Any]:
    """Train as ``opts`` says and return the metrics.

    The options, the data and the memory the run needs are checked before any process starts. With
    ``opts.metrics_out``, the metrics are written there too.

    Args:
        opts: what to train and how (validated here with `TrainOptions.check`).
        num_procs: start that many local ranks (one partition each); None: this process is one rank of a
            torchrun job.
        dataset: a dataset directory (``meta.json``) or chunked graph to partition into ``work_dir`` first
            (into ``num_procs`` parts, or ``WORLD_SIZE`` under torchrun), instead of ``opts.part_config``.
        work_dir: where ``dataset`` is partitioned.
        part_method: how ``dataset`` is partitioned (e.g. ``metis``, ``random``).
        host: the address every socket of the run listens on (127.0.0.1: this machine only); beyond loopback
            every process needs the job's secret (``GRAPHSHARD_SECRET`` or a secret file).
        memory: bytes the local processes may use together (0: the machine's memory); a run predicted to
            need more is refused before any process starts.

    Returns:
        The metrics: per-epoch figures, the final test figures and the time account.

    Raises:
        InputError: an option out of its type or range, options that do not fit together, data that does
            not fit the options, or a run predicted not to fit the memory or the devices.
        FormatError: the partition config, a partition file or a checkpoint is missing or corrupt.
        DistError: a rank failed; names the rank.
    """
    refuse_spawn_reimport()
    if not num_procs:  # one rank of a job: torchrun's variables, or Slurm's under srun
        adopt_launcher_env()
    started = time.perf_counter()
    command_s = timing.since_command(started)  # the graphshard command: its start and imports, before this
    metrics, launcher = _train(opts, num_procs, dataset, work_dir, part_method=part_method, host=host, memory=memory)
    rank = metrics.pop("time", {})
    if "finished_at" in rank and num_procs:
        launcher["shutdown_s"] = time.time() - rank.pop("finished_at")
    rank.pop("finished_at", None)
    total = time.perf_counter() - started + (command_s or 0.0)
    metrics["time"] = timing.closing_account(rank, total, command_s=command_s, **launcher)
    metrics["complete"] = True
    if opts.metrics_out and (num_procs or os.environ.get("RANK", "0") == "0"):
        write_json(opts.metrics_out, metrics)
    return metrics


def _train(
    opts: TrainOptions,
    num_procs: int | None,
    dataset: str | None,
    work_dir: str,
    *,
    part_method: str,
    host: str,
    memory: int = 0,
) -> tuple[dict[str, Any], dict[str, float]]:
    """:func:`train`'s work: the metrics and the launcher's phases of the time account."""
    launcher: dict[str, float] = {}
    began = time.time()  # ranks count "starting processes" from here, less partitioning and compiling
    opts.check()
    ranks_here = num_procs or local_ranks()
    check_device(opts.device, ranks_here, opts.precision, "host" if opts.rehearse else opts.cache_device)
    if (rule := rule_line(opts.device, ranks_here)) and (num_procs or os.environ.get("RANK", "0") == "0"):
        notice.info(rule)
    if opts.save_embeddings:  # never replace a user's directory: refuse before any work
        check_embeddings_target(opts.save_embeddings)
    if opts.log_dir and (num_procs or os.environ.get("RANK", "0") == "0"):
        check_log_dir(opts.log_dir)
    if is_custom(opts.model):  # the user's module imports: checked before partitioning or starting a rank
        load_factory(opts.model)
    if dataset:
        parts = num_procs or int(os.environ.get("WORLD_SIZE", "1"))
        out = f"{work_dir}/{parts}parts-{part_method}"
        if not num_procs:  # torchrun: each host partitions into its own directory, inside the job
            out += f"/host{os.environ.get('GROUP_RANK', '0')}"
        link, edge_type = link_part(opts)
        job = PartitionJob(dataset, out, parts, part_method, seed=opts.seed, link=link, edge_type=edge_type)
        if not num_procs:
            return _rank_main(opts, None, job), launcher
        if not _paths(**job._asdict())[1].is_file():  # to be partitioned here: refused first if it cannot fit
            check_partition_fits(dataset, part_method, parts, allowed(memory))
        with timing.phase("partition_s", launcher):
            _partition_announced(job, memory=allowed(memory))
        opts = _with_partitions(opts, job)
    # the data's names, the partition count and the held-out edges: checked before starting any process
    cfg = read_config(opts.part_config) if opts.part_config else None  # this process's one read of it
    opts = resolve_data(
        opts,
        num_procs or int(os.environ.get("WORLD_SIZE", "1")),
        announce=bool(num_procs) or os.environ.get("RANK", "0") == "0",
        cfg=cfg,
    )
    if num_procs:
        assert cfg is not None  # resolve_data refuses a run without partitions
        # predicted not to fit this machine: refused now, with the numbers
        layers, outputs = evaluated(cfg, opts)
        budget, layerwise = allowed(memory), opts.eval_fanouts is None
        check_train_fits(
            cfg,
            num_procs,
            num_procs,
            opts.hidden,
            layerwise=layerwise,
            budget=budget,
            step="training",
            layers=layers,
            outputs=outputs,
            colocated=opts.colocated,
        )
        check_devices_fit(cfg, opts, num_procs, num_procs)  # each device's ranks: refused now if they cannot fit
        if opts.checkpoint:  # a checkpoint of another run, or ranks at different epochs: say so now
            check_checkpoints(opts.checkpoint, run_identity(cfg, opts, num_procs), num_procs)
    if not num_procs:
        return _rank_main(opts, None, cfg=cfg), launcher
    with timing.phase("compile_s", launcher):
        warm_up()  # compiled once here (first run only), loaded from the cache by every rank
    with tempfile.TemporaryDirectory() as tmp:
        result = str(Path(tmp) / "metrics.json")
        began += sum(launcher.values())
        launch(
            _rank_main,
            num_procs,
            (opts, result, None, logging.getLogger().getEffectiveLevel(), began),
            host,
            timeout=opts.timeout,
        )
        return json.loads(Path(result).read_text()), launcher
