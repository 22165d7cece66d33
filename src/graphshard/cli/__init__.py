"""The ``graphshard`` command line: one module per group of commands, each holding its flags next to the
function that runs it (input → partition → pipeline → launch/train → plot). A command's function imports the
step it runs (building the parser imports no step's code; the layer test accepts these imports: they point down)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

# torch's C++ side logs warnings with a native stack trace (a store's peer gone, say) before graphshard turns
# the error into one line; the command shows that line only. Read once, when torch loads: set before it does.
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")

from .. import __version__
from ..distributed.host import processes
from ..distributed.ranks import interrupt
from ..errors import GraphshardError
from ..tasks import timing
from . import data, infer, launch, partition, pipeline, plot, prepare, serve, train
from .common import HelpFormatter, Parser, apply_security

JOINING = ("train", "embed", "dispatch", "serve")  # commands whose process, without --num-procs, is a run's rank
# commands that start ranks here (with --num-procs; demo always), and the module of what their ranks run
# (training ranks import torchmetrics at their start: about a second each, paid once in the server instead)
TRAINING = ("graphshard.train.run", "torchmetrics.functional.classification", "torchmetrics.functional.regression")
LAUNCHING: dict[str, tuple[str, ...]] = {
    "train": TRAINING,
    "demo": TRAINING,
    "embed": ("graphshard.train.checkpoint_embed",),
    "dispatch": ("graphshard.pipeline.dispatch.run",),
    "serve": ("graphshard.serve.service",),
    "launch": (),
}
NOTICE_LOGGER = "graphshard.notice"  # one-line notices shown at the default level (e.g. kernel compilation)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="graphshard",
        formatter_class=HelpFormatter,
        description="Partition graphs for distributed GNN training, and train on them.",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log each phase (time, peak memory), on every rank")
    p.add_argument("--version", action="version", version=f"graphshard {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (data, prepare, partition, pipeline, launch, train, infer, serve, plot):
        group.register(sub)
    return p


class _Formatter(logging.Formatter):
    """``graphshard: message`` for notices, ``graphshard: warning: message`` for warnings and worse."""

    def format(self, record: logging.LogRecord) -> str:
        level = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
        return f"graphshard: {level}{record.getMessage()}"


def configure_logging(verbose: bool) -> None:
    """``-v``: every phase with time and level; otherwise warnings and the notices of :data:`NOTICE_LOGGER`."""
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
        return
    handler = logging.StreamHandler()
    handler.setFormatter(_Formatter())
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    logging.getLogger(NOTICE_LOGGER).setLevel(logging.INFO)


def _quiet_broken_pipe() -> int:
    """Output piped into a reader that stopped (``| head``): end quietly, as Unix tools do."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit must not fail again
    return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by the closed pipe


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit code (2: an error, printed as one line naming its cause)."""
    if argv is None:  # this process is the command: its time account starts when the process did
        timing.command_started()
    try:
        return _run(argv)
    except BrokenPipeError:
        return _quiet_broken_pipe()


def _run(argv: list[str] | None) -> int:
    args: argparse.Namespace | int | None = None
    with interrupt.handled(lambda: _interrupted_line(args), speak=_speaks) as stop:
        try:
            args = _parse(argv)
            if isinstance(args, int):
                if args and Parser.last_error:  # a usage error: a rank of a run tells its peers
                    _tell_peers(argv, Parser.last_error, None)
                return args
            configure_logging(getattr(args, "verbose", False))
            apply_security(args)
            _start_ranks_early(args)
            args.func(args)
            sys.stdout.flush()
        except BaseException as exc:
            stopped = interrupt.signal_of(exc)  # SIGINT, SIGTERM: one line, 130 or 143
            if stopped is not None:
                code = stop.farewell(stopped)
                if argv is None:  # this process is the command: it ends now (nothing half-stopped runs at exit)
                    processes.exit_now(code)
                return code
            if isinstance(exc, BrokenPipeError) or not isinstance(exc, (GraphshardError, OSError, RuntimeError)):
                raise
            from ..distributed.transport.liveness import write_error_file

            print(f"graphshard: error: {exc}", file=sys.stderr)  # OSError names its path (permissions, ...)
            write_error_file(str(exc))  # under torchrun: its summary names this, not "no error file"
            _tell_peers(argv, str(exc), args if isinstance(args, argparse.Namespace) else None)
            return 2
    return 0


def _start_ranks_early(args: argparse.Namespace) -> None:
    """A command about to start ranks on this machine starts their fork server before its own imports and
    checks, which then overlap the server's (see :func:`graphshard.distributed.ranks.forkserver.start_early`)."""
    if args.command in LAUNCHING and (args.command == "demo" or getattr(args, "num_procs", None)):
        from ..distributed.ranks import forkserver

        forkserver.start_early(LAUNCHING[args.command])


def _tell_peers(argv: list[str] | None, error: str, args: argparse.Namespace | None) -> None:
    """A rank of a run started by torchrun, srun or a PyTorchJob that fails before joining tells its peers
    (see :mod:`graphshard.distributed.ranks.startup`), so they stop in seconds naming it."""
    words = sys.argv[1:] if argv is None else argv
    command = args.command if args is not None else next((w for w in words if not w.startswith("-")), None)
    local = getattr(args, "num_procs", None) if args is not None else "--num-procs" in words
    if command not in JOINING or local:
        return
    from ..distributed.ranks import startup

    startup.tell(error, timeout=min(float(getattr(args, "timeout", None) or startup.LINGER_S), startup.LINGER_S))


def _parse(argv: list[str] | None) -> argparse.Namespace | int:
    """The command's arguments, or the exit code of a usage error (2) or of --help/--version (0)."""
    try:
        return build_parser().parse_args(argv)
    except SystemExit as exc:
        sys.stdout.flush()
        return exc.code if isinstance(exc.code, int) else 2


def _interrupted_line(args: argparse.Namespace | int | None) -> str:
    """What an interrupted command says (its ``interrupted`` default: a function of the arguments)."""
    describe = getattr(args, "interrupted", None)
    return describe(args) if describe is not None else "interrupted"


def _speaks() -> bool:
    """Whether this process says how an interrupted command ended: one per terminal (under torchrun or
    srun, each host's local rank 0)."""
    return os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0")) == "0"


__all__ = ["build_parser", "main"]
