"""Phase timing for long jobs: logs each phase's time and peak memory, and drives a tqdm bar."""

from __future__ import annotations

import contextlib
import logging
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from tqdm.auto import tqdm


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (bytes).

    Read from ``VmHWM`` where Linux provides it: ``ru_maxrss`` survives fork + exec, so a child would
    report its parent's peak."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class PhaseTimer:
    """Times named phases: ``with timer.phase("relabel"): ...``; ``timer.seconds`` holds the results."""

    total: int
    logger: logging.Logger
    desc: str = "partition"
    seconds: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._bar = tqdm(total=self.total, desc=self.desc, unit="phase", disable=None, leave=False)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._bar.set_postfix_str(name)
        start = time.perf_counter()
        yield
        elapsed = time.perf_counter() - start
        self.seconds[name] = self.seconds.get(name, 0.0) + elapsed
        self.logger.info("%s: %.2f s (peak RSS %.2f GiB)", name, elapsed, peak_rss_bytes() / 2**30)
        self._bar.update(1)

    def close(self) -> None:
        self._bar.close()
