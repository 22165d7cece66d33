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


def test_readme_command_line_block_runs_as_pasted(tmp_path):
    """The command-line block runs as written, line by line, in a fresh directory (no [optional] flags inside
    commands: those are in the table below it): generators, partition, plan, inspect and a training run."""
    block = _command_line_block()
    assert "[" not in block, "an optional flag in brackets cannot be pasted into a shell"
    lines = [re.sub(r"\s+#.*", "", line).split() for line in block.replace("\\\n", " ").splitlines()]
    lines = [argv for argv in lines if argv]
    assert [argv[1] for argv in lines] == ["generate", "generate", "generate", "partition", "plan", "inspect", "train"]
    for argv in lines:
        done = subprocess.run(
            [sys.executable, "-m", "graphshard.cli", *argv[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=480,
        )
        assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stderr[-3000:]}"
    assert "test accuracy" in done.stdout, done.stdout


def test_what_the_readme_writes_is_ignored_by_git():
    """Run in the checkout, the README's examples leave nothing untracked: every top-level path they write
    (``--out``, ``--checkpoint``, ``--save-embeddings``, ``out_path=``, ``--plot``) is in .gitignore."""
    text = README.read_text()
    written = re.findall(r"(?:--out|--checkpoint|--save-embeddings|--plot|--log-dir) ([\w./-]+)", text)
    written += re.findall(r"out_path=\"([\w./-]+)\"", text)
    placeholder = re.compile(r"[A-Z_]+(\.\w+)?")  # FILE.png in an options table names no file
    tops = {w.split("/")[0] for w in written if w and not w.startswith("-") and not placeholder.fullmatch(w)}
    ignored = set(re.findall(r"^/([\w.-]+)/?$", (README.parent / ".gitignore").read_text(), re.M))
    assert tops and tops - ignored == set(), f"written by the README but not ignored: {sorted(tops - ignored)}"
