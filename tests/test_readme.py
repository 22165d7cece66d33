"""Every Python block of the README runs as written, in order, in one directory (the quick start makes the
partitions the runtime example trains on). Each block starts with ``# NAME.py``; a block whose first lines
say ``run with  graphshard launch --num-procs N NAME.py`` is run that way. The command-line block runs too
(its R-MAT path smaller). tests/test_docs.py checks that every other block says why it is not run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks() -> list[tuple[str, str]]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    named = []
    for block in blocks:
        head = re.match(r"# (\w+\.py)", block)
        assert head, f"README Python block without a '# NAME.py' first line:\n{block[:200]}"
        named.append((head.group(1), block))
    return named


def _command_line_block() -> str:
    """The README's command-line block: the one that generates an R-MAT graph."""
    return next(b for b in re.findall(r"```bash\n(.*?)```", README.read_text(), re.S) if "generate rmat" in b)


def test_readme_python_blocks_run_as_written(tmp_path):
    blocks = _blocks()
    says = {
        "quickstart.py": "are owned by partitions",
        "train_sage.py": "epoch 2: loss",  # what each prints
        "my_models.py": "my_models:gat trained",
    }
    assert [name for name, _ in blocks] == list(says)
    for name, block in blocks:
        (tmp_path / name).write_text(block)
        launch = re.search(r"graphshard launch --num-procs (\d+) " + re.escape(name), block.split("\n\n")[0])
        argv = (
            [sys.executable, "-m", "graphshard.cli", "launch", "--num-procs", launch.group(1), "--timeout", "240", name]
            if launch
            else [sys.executable, name]
        )
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=480)
        assert done.returncode == 0, f"{name}:\n{done.stderr[-3000:]}"
        assert "Warning" not in done.stderr, done.stderr
        assert says[name] in done.stdout, done.stdout


def test_readme_command_line_path_trains(tmp_path):
    """The command-line block's R-MAT path runs as written (flags in [brackets] are optional and left out),
    only smaller: generate a graph, partition it, plan, inspect and train on it (a graph without labels cannot be
    trained); its other generators run as written."""
    lines = [
        re.sub(r"\[[^\]]*\]", "", re.sub(r"\s+#.*", "", line)).split()
        for line in _command_line_block().replace("\\\n", " ").splitlines()
    ]
    others = [argv for argv in lines if argv and "rmat20" not in " ".join(argv)]
    assert [argv[:3] for argv in others] == [
        ["graphshard", "generate", "hetero"],
        ["graphshard", "generate", "community"],
    ]
    for argv in others:
        done = subprocess.run(
            [sys.executable, "-m", "graphshard.cli", *argv[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stderr[-3000:]}"
    commands = [argv for argv in lines if "rmat20" in " ".join(argv)]
    steps = {argv[1]: argv[2:] for argv in commands}
    assert list(steps) == ["generate", "partition", "plan", "inspect", "train"], steps
    smaller = {"--scale": "9", "--num-parts": "2", "--num-procs": "2"}  # 512 nodes, 2 partitions and ranks
    for name in steps:
        argv = [smaller.get(steps[name][i - 1], a) if i else a for i, a in enumerate(steps[name])]
        argv = [a.replace("rmat20.json", "rmat9.json") for a in argv]  # the graph is named by its scale
        extra = ["--timeout", "240"] if name == "train" else []
        done = subprocess.run(
            [sys.executable, "-m", "graphshard.cli", name, *argv, *extra],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=480,
        )
        assert done.returncode == 0, f"graphshard {name} {' '.join(argv)}:\n{done.stderr[-3000:]}"
    assert "test accuracy" in done.stdout, done.stdout


def test_what_the_readme_writes_is_ignored_by_git():
    """Run in the checkout, the README's examples leave nothing untracked: every top-level path they write
    (``--out``, ``--checkpoint``, ``--save-embeddings``, ``out_path=``, ``--plot``) is in .gitignore."""
    text = README.read_text()
    written = re.findall(r"(?:--out|--checkpoint|--save-embeddings|--plot|--log-dir) ([\w./-]+)", text)
    written += re.findall(r"out_path=\"([\w./-]+)\"", text)
    tops = {w.split("/")[0] for w in written if w and not w.startswith("-")}
    ignored = set(re.findall(r"^/([\w.-]+)/?$", (README.parent / ".gitignore").read_text(), re.M))
    assert tops and tops - ignored == set(), f"written by the README but not ignored: {sorted(tops - ignored)}"
