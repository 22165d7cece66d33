"""Stop means stop: SIGINT or SIGTERM to a command's launcher, to its whole process group (Ctrl-C in a
terminal) or to a torchrun agent stops every rank within 5 s, with one line and no traceback or transport
warning, exit code 130 (SIGINT) or 143 (SIGTERM), no process left behind and nothing that looks complete;
an interrupted training run names the epoch the same command resumes after, and it does."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from graphshard.distributed.ranks import interrupt
from graphshard.jit import NOTICE
from tests.ranks import alive, fork_server, rank_processes, stat_fields

BOUND = 5.0  # seconds from the signal to the end of every process of the run
STARTING_BOUND = 2.0  # seconds to stop a run whose ranks are starting: the fork server's imports take 4 s or more
START = 240.0  # seconds a command may take to start working (a loaded 2-core machine)
CLI = [sys.executable, "-m", "graphshard.cli"]
FOREIGN = re.compile(r"Traceback|tensorpipe|gloo|Warning|\[W\d{4}|\[E\d{4}", re.I)


@dataclass
class Ended:
    code: int
    seconds: float  # from the signal until the command and every process of its run were gone
    stdout: str
    stderr: str

    def lines(self) -> list[str]:
        """Standard error's lines, but the kernels' first-run compilation notice (a fresh numba cache)."""
        return [ln for ln in self.stderr.splitlines() if ln.strip() and NOTICE not in ln]


@pytest.fixture(autouse=True, scope="module")
def _sigint_as_from_a_terminal():
    """A command run in the background by a non-interactive shell (``cmd &``, as a CI script may run the tests)
    starts with SIGINT ignored, and graphshard leaves an inherited ignored signal ignored, as nohup expects;
    the runs these tests interrupt start with SIGINT at its default, as from a terminal."""
    before = signal.getsignal(signal.SIGINT)
    if before is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # reset to the default in the children
    yield
    signal.signal(signal.SIGINT, before)


def test_an_ignored_sigint_stays_ignored(tmp_path):
    """Started with SIGINT ignored (in the background, or under nohup), a run goes on through a SIGINT."""
    code = (
        "import os, signal, time\n"
        "from graphshard.distributed.ranks import interrupt\n"
        "with interrupt.handled(speak=False):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(0.2)\n"
        "print('went on')\n"
    )
    ignore = "import signal, subprocess, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    ignore += "sys.exit(subprocess.run([sys.executable, '-c', sys.argv[1]]).returncode)"
    done = subprocess.run([sys.executable, "-c", ignore, code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "went on\n", done.stderr


def _run_processes(leader: int) -> set[int]:
    """Every live process of the run: its process group, and the descendants of its leader."""
    stats = {int(e): fields for e in os.listdir("/proc") if e.isdigit() and (fields := stat_fields(int(e)))}
    found = {pid for pid, st in stats.items() if int(st[2]) == leader and st[0] != "Z"}
    todo = [leader]
    while todo:
        parent = todo.pop()
        for pid, st in stats.items():
            if int(st[1]) == parent and pid not in found:
                found.add(pid)
                todo.append(pid)
    return {p for p in found if alive(p)}


def _wait(condition: Callable[[], object], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what}")
        time.sleep(0.05)  # polling a condition against a deadline, not a fixed wait


def _interrupt(cmd: list[str], cwd: Path, ready: Callable[[int], bool], how: str, signum: int) -> Ended:
    """Start ``cmd`` in its own process group, wait until ``ready(its pid)`` says it works, send ``signum``
    to it only (``how="leader"``) or to its whole group (``"group"``), and wait for everything to end."""
    out, err = cwd / f"out-{time.monotonic_ns()}.txt", cwd / f"err-{time.monotonic_ns()}.txt"
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=o, stderr=e, start_new_session=True)
    try:
        _wait(lambda: proc.poll() is not None or ready(proc.pid), START, f"{' '.join(cmd[3:5])} to start working")
        assert proc.poll() is None, f"ended before it was interrupted ({proc.returncode}): {err.read_text()[-3000:]}"
        members = _run_processes(proc.pid)
        assert len(members) >= 3, members  # the launcher (or agent) and its ranks
        start = time.monotonic()
        if how == "group":
            os.killpg(proc.pid, signum)  # Ctrl-C in a terminal: every process of the foreground group
        else:
            os.kill(proc.pid, signum)
        code = proc.wait(BOUND + 30)
        _wait(
            lambda: not any(alive(p) for p in members | _run_processes(proc.pid)),
            BOUND + 30,
            "every process of the run to end",
        )
        seconds = time.monotonic() - start
    finally:
        if proc.poll() is None or _run_processes(proc.pid):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait(10)
    return Ended(code, seconds, out.read_text(), err.read_text())


def _assert_stopped(ended: Ended, signum: int, line: str | re.Pattern, allowed: tuple[str, ...] = ()) -> None:
    """Within the bound, with 128 + signum, ``line`` as the only line on standard error (but ``allowed``)."""
    said = [ln for ln in ended.lines() if not any(a in ln for a in allowed)]
    assert len(said) == 1 and (re.fullmatch(line, said[0]) if isinstance(line, re.Pattern) else said[0] == line), (
        ended.stderr[-3000:]
    )
    assert not FOREIGN.search(ended.stderr), ended.stderr[-3000:]
    assert ended.code == 128 + signum, (ended.code, ended.stderr[-3000:])
    assert ended.seconds < BOUND, f"stopped after {ended.seconds:.1f} s"


def _epoch(ckpt: Path, rank: int) -> int | None:
    path = ckpt / f"rank{rank}" / "checkpoint.json"
    try:
        return int(json.loads(path.read_text())["epoch"])
    except (OSError, ValueError, KeyError):
        return None


def _checkpointed(ckpt: Path, epoch: int) -> Callable[[int], bool]:
    """Whether both ranks' checkpoints stand at ``epoch`` or later."""

    def ready(_: int) -> bool:
        epochs = [_epoch(ckpt, r) for r in range(2)]
        return all(e is not None and e >= epoch for e in epochs)

    return ready


# ---------------------------------------------------------------------------------------------- the module


def test_a_signal_unwinds_as_interrupted_after_a_deferred_section_and_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    done = []
    with pytest.raises(interrupt.Interrupted) as exc:
        with interrupt.handled(speak=False, grace=60):
            with interrupt.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                _wait(lambda: interrupt.pending(), 10, "the handler")
                done.append("the section ran to its end")
    assert done and exc.value.exit_code == 143 and isinstance(exc.value, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) is before
    assert os.readlink("/proc/self/fd/2") != os.devnull  # standard error is back


def test_children_start_with_the_signals_blocked():
    """Spawned as the launcher spawns its ranks (multiprocessing starts its resource tracker on the first
    spawn, and that unblocked the signals), and as a subprocess."""
    import multiprocessing

    with interrupt.starting_children():
        spawned = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(30,))
        spawned.start()
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        for pid in (spawned.pid, child.pid):
            status = Path(f"/proc/{pid}/status").read_text()
            blocked = int(re.search(r"SigBlk:\s*([0-9a-f]+)", status).group(1), 16)
            assert blocked & (1 << (signal.SIGINT - 1)) and blocked & (1 << (signal.SIGTERM - 1)), status
    finally:
        spawned.kill()
        child.kill()
        spawned.join()
        child.wait()
    assert not signal.pthread_sigmask(signal.SIG_BLOCK, []) & {signal.SIGINT, signal.SIGTERM}


# -------------------------------------------------------------------------------------------------- train


@dataclass
class Training:
    root: Path
    runs: list[tuple[Ended, int]]  # each interrupted run, with the epoch its checkpoint stood at before the signal

    @property
    def ckpt(self) -> Path:
        return self.root / "ck"


def _train_cmd() -> list[str]:
    return [
        *CLI,
        "train",
        "--part-config",
        "parts/g.json",
        "--num-procs",
        "2",
        "--epochs",
        "1000",
        "--fanouts",
        "4,4",
        "--batch-size",
        "512",
        "--checkpoint",
        "ck",
        "--metrics-out",
        "m.json",
        "--save-embeddings",
        "emb.npy",
        "--timeout",
        "60",
    ]


@pytest.fixture(scope="module")
def training(tmp_path_factory) -> Training:
    """The same training command interrupted three times: SIGINT to the launcher once epoch 1 is
    checkpointed; run again (it resumes) and Ctrl-C (SIGINT to the group) a checkpoint later; SIGTERM to
    the launcher a checkpoint after that."""
    from graphshard import partition_graph
    from graphshard.datasets import community_graph

    root = tmp_path_factory.mktemp("train")
    partition_graph(community_graph(num_nodes=20000, seed=4).graph, "g", 2, root / "parts", part_method="random")
    runs = []
    for how, signum in (("leader", signal.SIGINT), ("group", signal.SIGINT), ("leader", signal.SIGTERM)):
        before = _epoch(root / "ck", 0)
        target = 1 if before is None else before + 1
        runs.append((_interrupt(_train_cmd(), root, _checkpointed(root / "ck", target), how, signum), target))
    return Training(root, runs)


TRAIN_LINE = re.compile(r"graphshard: interrupted after epoch (\d+); run the same command to resume")
RESUMED = "graphshard: resuming after epoch"


def _named_epoch(t: Training, run: int, signum: int) -> int:
    """The epoch run ``run`` named, once it is checked to have stopped as it should (the next run's notice
    is the only other line a resumed run may show)."""
    ended, reached = t.runs[run]
    _assert_stopped(ended, signum, TRAIN_LINE, allowed=(RESUMED,) if run else ())
    epoch = int(TRAIN_LINE.fullmatch([ln for ln in ended.lines() if RESUMED not in ln][0]).group(1))
    assert epoch >= reached  # what was checkpointed before the signal is kept
    return epoch


def _resumed_after(t: Training, run: int) -> int:
    """The epoch run ``run`` resumed after, checked against its first epoch line."""
    ended, _ = t.runs[run]
    epoch = int(re.search(rf"^{RESUMED} (\d+) ", ended.stderr, re.M).group(1))
    lines = [int(m) for m in re.findall(r"^epoch\s+(\d+):", ended.stdout, re.M)]
    assert lines and lines[0] == epoch + 1, ended.stdout[:500]
    return epoch


def test_train_sigint_to_the_launcher_names_the_epoch_a_rerun_resumes_after(training):
    assert _resumed_after(training, 1) == _named_epoch(training, 0, signal.SIGINT)


def test_train_ctrl_c_to_a_resumed_run(training):
    epoch = _named_epoch(training, 1, signal.SIGINT)
    assert epoch > _resumed_after(training, 1)
    assert _resumed_after(training, 2) == epoch


def test_train_sigterm_leaves_one_checkpoint_on_every_rank_and_nothing_complete(training):
    epoch = _named_epoch(training, 2, signal.SIGTERM)
    assert {_epoch(training.ckpt, r) for r in range(2)} == {epoch}  # committed by every rank or by none
    assert not list(training.ckpt.rglob("*.tmp")) and not list(training.ckpt.rglob(".staged"))  # nothing staged left
    assert not (training.root / "emb.npy").exists()
    assert json.loads((training.root / "m.json").read_text())["complete"] is False


def _ranks_starting(leader: int) -> bool:
    """Whether the launcher is starting its ranks: its fork server is up (importing what the ranks need, with
    the signals blocked, while the launcher waits for it), or its ranks are spawned (still importing)."""
    return fork_server(leader) is not None or len(rank_processes(leader)) >= 2


def test_train_ctrl_c_while_the_ranks_start(training, tmp_path):
    """Ranks not started yet, or still starting, have no handler: the launcher kills them at once (they joined
    nothing), and the fork server with them if it is still importing what they need."""
    cmd = [
        *CLI,
        "train",
        "--part-config",
        str(training.root / "parts" / "g.json"),
        "--num-procs",
        "2",
        "--checkpoint",
        "ck",
        "--timeout",
        "60",
    ]
    ended = _interrupt(cmd, tmp_path, _ranks_starting, "group", signal.SIGINT)
    _assert_stopped(
        ended, signal.SIGINT, "graphshard: interrupted before the first epoch was checkpointed in ck; nothing was kept"
    )
    assert ended.seconds < STARTING_BOUND, f"stopped after {ended.seconds:.1f} s"  # not once the imports are done


def test_the_train_line_without_a_checkpoint_or_before_the_first_one(tmp_path):
    from graphshard.cli import build_parser

    def line(*extra: str) -> str:
        args = build_parser().parse_args(["train", "--part-config", "p.json", "--num-procs", "2", *extra])
        return args.interrupted(args)

    assert line() == (
        "interrupted; no checkpoint was kept (with --checkpoint DIR, running the same command again "
        "resumes after the last finished epoch)"
    )
    ckpt = tmp_path / "ck"
    assert (
        line("--checkpoint", str(ckpt)) == f"interrupted before the first epoch was checkpointed in {ckpt}; "
        "nothing was kept"
    )


# ----------------------------------------------------------------------------------------------- dispatch


@pytest.fixture(scope="module")
def chunked(tmp_path_factory) -> Path:
    from graphshard.chunked.writer import chunk_graph
    from graphshard.datasets import community_graph
    from graphshard.pipeline.assign import assign_chunked

    root = tmp_path_factory.mktemp("dispatch")
    chunk_graph(community_graph(num_nodes=8000, avg_degree=16, seed=1).graph, root / "c", 4, "numpy", graph_name="g")
    assign_chunked(root / "c", root / "a", 4, "random")
    return root


@pytest.mark.parametrize(
    "how,signum", [("leader", signal.SIGINT), ("group", signal.SIGINT), ("leader", signal.SIGTERM)]
)
def test_dispatch(chunked, how, signum):
    out = chunked / f"out-{how}-{signum}"
    cmd = [
        *CLI,
        "dispatch",
        "--dataset",
        "c",
        "--assignment",
        "a",
        "--out",
        out.name,
        "--num-procs",
        "2",
        "--num-hops",
        "2",
        "--timeout",
        "60",
    ]
    ended = _interrupt(cmd, chunked, lambda _: (out / ".dispatch-g").is_dir(), how, signum)  # the ranks' own
    _assert_stopped(
        ended,
        signum,
        "graphshard: interrupted before the partitions were published (no config was "
        "written); run the same command to resume: the partitions already written are reused",
    )
    assert not (out / "g.json").exists()


# -------------------------------------------------------------------------------------------------- embed


def _mapped(directory: Path) -> Callable[[int], bool]:
    """Whether two processes of the run have memory-mapped files of ``directory`` (ranks loading their
    partitions)."""

    def ready(leader: int) -> bool:
        found = 0
        for pid in _run_processes(leader):
            try:
                found += str(directory) in Path(f"/proc/{pid}/maps").read_text()
            except OSError:
                continue
        return found >= 2

    return ready


@pytest.mark.parametrize("how,signum", [("leader", signal.SIGINT), ("group", signal.SIGINT), ("group", signal.SIGTERM)])
def test_embed(training, how, signum):
    out = training.root / f"emb-{how}-{signum}.npy"
    cmd = [
        *CLI,
        "embed",
        "--part-config",
        "parts/g.json",
        "--checkpoint",
        "ck",
        "--out",
        out.name,
        "--num-procs",
        "2",
        "--timeout",
        "60",
    ]
    ended = _interrupt(cmd, training.root, _mapped(training.root / "parts"), how, signum)
    if out.exists():  # the signal came while the output was put in place: it is whole, and the line says so
        _assert_stopped(ended, signum, f"graphshard: interrupted after writing {out.name} (complete)")
        assert np.load(out).shape[0] == 20000  # every node of the training fixture's graph
    else:
        _assert_stopped(ended, signum, f"graphshard: interrupted; run the same command again to write {out.name}")


# ----------------------------------------------------------------------------------------------- torchrun


def test_torchrun_agent_sigint(training, tmp_path):
    """torchrun sends SIGINT on to its workers: they stop within the bound and local rank 0 says the line;
    torchrun says what it says (its warnings and its own SignalException traceback), but no rank adds a
    traceback or a transport warning."""
    import shutil

    shutil.copytree(training.root / "parts", tmp_path / "parts")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        "127.0.0.1:0",
        "-m",
        "graphshard.cli",
        "train",
        "--part-config",
        "parts/g.json",
        "--epochs",
        "1000",
        "--fanouts",
        "4,4",
        "--batch-size",
        "512",
        "--checkpoint",
        "ck",
        "--timeout",
        "60",
    ]
    ended = _interrupt(cmd, tmp_path, _checkpointed(tmp_path / "ck", 1), "leader", signal.SIGINT)
    epochs = {_epoch(tmp_path / "ck", r) for r in range(2)}
    assert len(epochs) == 1, epochs
    ours = [ln for ln in ended.lines() if ln.startswith("graphshard:")]
    assert ours == [f"graphshard: interrupted after epoch {epochs.pop()}; run the same command to resume"], (
        ended.stderr[-3000:]
    )
    assert not re.search(r"tensorpipe|gloo|\[rank\d+\]", ended.stderr, re.I), ended.stderr[-3000:]
    frames = re.findall(r'^\s*File "([^"]+)"', ended.stderr, re.M)
    assert not [f for f in frames if "graphshard" in f], ended.stderr[-3000:]  # torchrun's own traceback only
    assert ended.code != 0 and ended.seconds < BOUND, (ended.code, ended.seconds)
