"""One end of tests/cluster/test_channel_priority.py, run on an emulated host: ``python priority_probe.py ROLE``.

Each end opens its channels on its host's address, prints ``{"listen": "ip:port"}`` and waits for the file
``peer`` (the test writes the other end's ``ip:port`` there). Then:

- ``rows`` (host 0) asks the peer for 4 MB of rows, again and again, until the peer tells it to stop;
- ``ping`` (host 1) answers those rows and, once the first has been asked for, sends the peer requests of
  70 KB (a small model's gradient) one after another, over the same link as its rows, and prints
  ``{"round_trips_ms": [...]}``.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from pathlib import Path

import torch

from graphshard.distributed.transport import channel

BOUND = 60.0  # seconds any wait may last (the test's own deadline is shorter)
ROWS = torch.ones(1 << 20)  # 4 MB of float32
ASKED = threading.Event()
STOP = threading.Event()


@channel.handler
def _rows() -> torch.Tensor:
    ASKED.set()
    return ROWS


@channel.handler
def _ping(grad: torch.Tensor) -> bool:
    return True


@channel.handler
def _stop() -> bool:
    STOP.set()
    return True


def say(**what) -> None:
    print(json.dumps(what), flush=True)


def _peer() -> tuple[str, int]:
    deadline = time.monotonic() + BOUND
    while not Path("peer").exists():  # the test writes it once both ends have printed their addresses
        if time.monotonic() > deadline:
            raise SystemExit("no peer file")
        time.sleep(0.05)  # polling for the test's file, against a deadline
    host, port = Path("peer").read_text().split(":")
    return host, int(port)


def main() -> None:
    role = sys.argv[1]
    me, other = (0, 1) if role == "rows" else (1, 0)
    ch = channel.Channels(socket.gethostbyname(socket.gethostname()), f"member {me}", BOUND, lambda m: peer)
    say(listen=f"{ch.address[0]}:{ch.address[1]}")
    peer = _peer()
    deadline = time.monotonic() + BOUND
    if role == "rows":
        while not STOP.is_set() and time.monotonic() < deadline:
            try:
                ch.send(other, _rows, ()).result()
            except channel.ChannelLost:
                if not STOP.is_set():  # the peer closes once it has told this end to stop
                    raise
    else:
        if not ASKED.wait(BOUND):
            raise SystemExit("no rows asked for")
        grad = torch.zeros(17_500)
        trips = []
        for _ in range(30):
            start = time.perf_counter()
            ch.send(other, _ping, (grad,)).result()
            trips.append((time.perf_counter() - start) * 1e3)
        ch.send(other, _stop, ()).result()
        say(round_trips_ms=trips)
    ch.close()


if __name__ == "__main__":
    main()
