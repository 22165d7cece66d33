"""Compiled kernels: the first compilation is announced once, and the cache is used by later processes —
also when graphshard is installed as a regular (non-editable) package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from graphshard.jit import NOTICE

REPO = Path(__file__).resolve().parents[1]
PROBE = (
    "from graphshard.cli import configure_logging\n"
    "configure_logging(False)\n"
    "import graphshard, graphshard.sampling.kernels as k\n"
    "from graphshard.jit import compiled\n"
    "k.warm_up()\n"
    "print(graphshard.__file__, compiled(k._fill)['cache_hits'], compiled(k._fill)['cache_misses'])\n"
)


def _probe(env: dict) -> tuple[str, int, int, str]:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    where, hits, misses = done.stdout.split()
    return where, int(hits), int(misses), done.stderr


def test_first_compilation_is_announced_once_and_cached(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    _, hits, misses, err = _probe(env)
    assert misses > 0 and err.count(NOTICE) == 1
    _, hits, misses, err = _probe(env)
    assert (hits, misses) == (2, 0) and NOTICE not in err  # plain and temporal signatures, both from the cache


def test_cache_is_used_from_a_regular_install(tmp_path):
    """``pip install`` without ``-e`` puts the sources in site-packages; numba caches beside them there."""
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(REPO),
        ],
        check=True,
        timeout=300,
        capture_output=True,
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"} | {"PYTHONPATH": str(target)}
    where, _, misses, err = _probe(env)
    assert Path(where).is_relative_to(target) and misses > 0 and NOTICE in err
    _, hits, misses, err = _probe(env)
    assert (hits, misses) == (2, 0) and NOTICE not in err
    assert list((target / "graphshard" / "sampling" / "__pycache__").glob("kernels*.nbi"))


def test_every_kernel_caches_its_machine_code():
    """Every numba kernel of graphshard (each ``@kernel`` in the sources, found by reading them) writes its
    compiled code to the disk cache: none is compiled again by every process."""
    import importlib
    import pkgutil
    import re

    from numba.core.dispatcher import Dispatcher

    import graphshard

    src = Path(graphshard.__file__).parent
    declared = sum(
        len(re.findall(r"^@(?:kernel|numba\.njit|njit|numba\.jit|jit)\b", f.read_text(), re.M))
        for f in src.rglob("*.py")
    )
    found = {}
    for info in pkgutil.walk_packages(graphshard.__path__, "graphshard."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        found |= {
            f"{info.name}.{k}": v
            for k, v in vars(module).items()
            if isinstance(v, Dispatcher) and v.py_func.__module__ == info.name
        }
    assert declared > 20 and len(found) == declared, sorted(found)
    assert [k for k, d in found.items() if type(d._cache).__name__ == "NullCache"] == []


def test_a_command_says_it_compiles_only_when_it_does(tmp_path):
    """The notice is no promise about other commands: it is shown by a run that really compiles, and a second
    run of the same command (same cache) loads everything and says nothing."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))  # a fresh install's cache

    def generate(out: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-m", "graphshard.cli", "generate", "rmat", "--scale", "8", "--out", str(tmp_path / out)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stderr.splitlines()

    assert generate("a") == [f"graphshard: {NOTICE}"]
    assert generate("b") == []
