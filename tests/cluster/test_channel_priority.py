"""Requests over a link full of rows: with the channels' request priority, a host whose queue honours
priorities (pfifo_fast, as this kernel's default) sends a small request ahead of the rows queued for the link;
with the priority turned off (``GRAPHSHARD_REQUEST_PRIORITY=0``) it waits behind them."""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from .harness import Cluster

PROBE = Path(__file__).with_name("priority_probe.py")
BOUND = 90.0


def _said(proc, key: str, deadline: float):
    while True:  # the probe prints its lines as it goes: read its log, against a deadline
        for line in proc.output().splitlines():
            if line.startswith("{") and key in (said := json.loads(line)):
                return said[key]
        assert proc.popen.poll() is None or key == "round_trips_ms", proc.tail()
        assert time.monotonic() < deadline, f"no {key!r} in time:\n{proc.tail()}"
        time.sleep(0.05)  # polling the probe's log, against a deadline


def _round_trips(c: Cluster, priority: str | None) -> list[float]:
    env = {} if priority is None else {"GRAPHSHARD_REQUEST_PRIORITY": priority}
    ends = [c.run(i, [sys.executable, str(PROBE), role], env=env, name=role) for i, role in enumerate(("rows", "ping"))]
    deadline = time.monotonic() + BOUND
    listen = [_said(p, "listen", deadline) for p in ends]
    for i, h in enumerate(c.hosts):
        (h.workdir / "peer").write_text(listen[1 - i])
    for p in ends:
        assert p.wait(BOUND) == 0, p.tail()
    for h in c.hosts:
        (h.workdir / "peer").unlink()
    return _said(ends[1], "round_trips_ms", deadline)


def test_requests_pass_the_rows_queued_for_a_slow_link(cluster):
    c = cluster(2, rate="100mbit", queue="pfifo_fast")
    behind = statistics.median(_round_trips(c, "0"))
    ahead = statistics.median(_round_trips(c, None))
    # 70 KB take 6 ms at 100 Mbit/s; the rows' connection keeps hundreds of KB queued for the link (42 ms a 512 KiB)
    assert ahead < 0.5 * behind, (ahead, behind)
