"""``launch``: run a user's script on N local ranks with a torchrun-style environment."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from .common import cluster_flags, command


def run_launch(args: argparse.Namespace) -> None:
    from ..distributed.ranks.launcher import launch, run_script
    from ..tasks.compiled import warm_up

    if not Path(args.script).is_file():
        raise FileNotFoundError(f"{args.script}: no such script")
    warm_up()  # the runtime's kernels, compiled here once (first run only) rather than by every rank at once
    os.environ["GRAPHSHARD_HEARTBEAT_TIMEOUT"] = str(args.heartbeat_timeout)  # the ranks' default (see liveness)
    launch(run_script, args.num_procs, (str(args.script), list(args.script_args)), args.host, timeout=args.timeout)


def register(sub: Any) -> None:
    lch = command(
        sub,
        "launch",
        "run a script on N local ranks (torchrun-style environment, no set-up)",
        "Run SCRIPT in --num-procs processes on this machine. Each sees RANK, WORLD_SIZE, LOCAL_RANK, "
        "MASTER_ADDR and MASTER_PORT as under torchrun; the rendezvous store binds to --host on a free "
        "port. The runtime's compiled kernels are compiled (first run) or loaded before the ranks start. If a "
        "rank fails the others are stopped and the error names the rank at fault.",
    )
    cluster_flags(lch, "number of ranks", required=True)
    lch.add_argument("script", help="Python file to run on every rank")
    lch.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    lch.set_defaults(func=run_launch)
