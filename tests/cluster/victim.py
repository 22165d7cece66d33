"""Run graphshard's command line on an emulated host, faulting this rank when it reaches a phase.

torchrun runs this file in place of ``-m graphshard.cli``. ``GS_FAULT`` (``cut``: take this host's link
down; ``stop``: SIGSTOP this process; ``kill``: SIGKILL it) strikes when rank ``GS_FAULT_RANK`` first says
it is doing something that starts with ``GS_FAULT_AT`` (see :func:`graphshard.distributed.transport.liveness.doing`),
so a test faults a host in the phase it means to, not at a moment guessed from outside. The rank first
goes on beating for a second in that phase (its peers learn what it is doing), then the fault strikes;
its time (``time.time()``) is written to ``GS_FAULT_MARK`` just before.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from graphshard.distributed.transport import liveness


def _arm() -> None:
    kind, at, mark = os.environ.get("GS_FAULT"), os.environ.get("GS_FAULT_AT", ""), os.environ.get("GS_FAULT_MARK")
    if not kind or os.environ.get("RANK") != os.environ.get("GS_FAULT_RANK"):
        return
    said = liveness.doing
    fired = []

    def doing(what: str) -> None:
        said(what)
        if fired or not what.startswith(at):
            return
        fired.append(what)
        time.sleep(1.0)  # the heartbeat carries the phase to the peers (a fault, not a synchronisation)
        with open(mark, "w") as f:
            f.write(f"{time.time()}\n{what}\n")
        if kind == "cut":
            subprocess.run(["ip", "link", "set", "eth0", "down"], check=True)
        else:
            os.kill(os.getpid(), signal.SIGSTOP if kind == "stop" else signal.SIGKILL)

    liveness.doing = doing  # before graphshard's modules import it


if __name__ == "__main__":
    _arm()
    from graphshard.cli import main

    sys.exit(main(sys.argv[1:]))
