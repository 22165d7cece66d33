"""One command line, one convention: every command has --help with its defaults, the same flag names for
the same concepts (old spellings still accepted, not shown), list flags parsed with a clear error,
--version, and a quiet end when the output is piped into a reader that stops early."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from graphshard import __version__
from graphshard.cli import build_parser, main
from graphshard.cli.common import HIDDEN_ALIASES


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (command path, parser) below ``parser``, nested sub-commands included."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, path + (name,))


def test_every_command_has_help_with_its_defaults(capsys):
    paths = list(_commands(build_parser()))
    assert {p[0] for p, _ in paths if p} >= {
        "generate",
        "chunk",
        "partition",
        "inspect",
        "assign",
        "dispatch",
        "parmetis",
        "launch",
        "train",
        "demo",
        "plot",
    }
    for path, parser in paths:
        assert main([*path, "--help"]) == 0
        text = capsys.readouterr().out
        assert f"usage: graphshard {' '.join(path)}".strip() in text
        for action in parser._actions:
            if (
                action.option_strings
                and action.default not in (None, False, argparse.SUPPRESS)
                and action.help != argparse.SUPPRESS
            ):
                flag = action.option_strings[0]
                section = text[text.index(f"  {flag}") :]
                assert "(default:" in section.split("\n  -")[0], f"{' '.join(path)} {flag}: default not shown"
        for old in HIDDEN_ALIASES:
            assert old not in text, f"{' '.join(path)} shows the old spelling {old}"


def test_one_name_per_concept():
    """The flags shared across commands mean the same thing everywhere."""
    by_command = {
        " ".join(p): {s for a in parser._actions for s in a.option_strings}
        for p, parser in _commands(build_parser())
        if p
    }
    for cmd in ("chunk", "partition", "assign", "dispatch", "parmetis export", "parmetis import"):
        assert {"--dataset", "--out"} <= by_command[cmd], cmd
    for cmd in ("partition", "assign", "train"):
        assert "--method" in by_command[cmd]
    for cmd in ("partition", "assign"):
        assert {"--balance-ntypes", "--balance-edges", "--objtype", "--seed"} <= by_command[cmd]
    for cmd in ("dispatch", "launch", "train"):
        assert {"--num-procs", "--host", "--timeout"} <= by_command[cmd]
    methods = {
        cmd: next(a for a in parser._actions if "--method" in a.option_strings)
        for p, parser in _commands(build_parser())
        if (cmd := " ".join(p)) in ("partition", "assign", "train")
    }
    assert len({tuple(a.choices) for a in methods.values()}) == 1
    assert {a.default for a in methods.values()} == {"metis"}


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"graphshard {__version__}"


@pytest.mark.parametrize(
    "value, message",
    [("10,x", "got '10,x' ('x' is not an integer)"), ("10,0", "each >= 1 or -1, got '10,0'"), ("", "got ''")],
)
def test_list_flags_are_checked(value, message, capsys):
    assert main(["train", "--part-config", "p.json", "--fanouts", value]) == 2
    err = capsys.readouterr().err
    assert "argument --fanouts" in err and message in err and "Traceback" not in err


def test_lists_starting_with_minus_one_are_values():
    args = build_parser().parse_args(["train", "--part-config", "p", "--fanouts", "-1,5", "--eval-fanouts", "-1,-1"])
    assert (args.fanouts, args.eval_fanouts) == ([-1, 5], [-1, -1])


def test_bad_numbers_are_usage_errors(capsys):
    for argv, flag in (
        (["partition", "--dataset", "d", "--out", "o", "--num-parts", "-1"], "--num-parts"),
        (["train", "--part-config", "p", "--lr", "0"], "--lr"),
        (["train", "--part-config", "p", "--seed", "-3"], "--seed"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"argument {flag}" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["generate", "community", "--nodes", "300", "--out", "{tmp}/d"],
        ["generate", "community", "--help"],
        ["--version"],
    ],
)
def test_piped_into_head_ends_quietly(argv, tmp_path):
    """A reader that went away (``| head -1``) closes the pipe: the command ends without a traceback."""
    argv = [a.format(tmp=tmp_path) for a in argv]
    code = f"import sys\nfrom graphshard.cli import main\nsys.exit(main({argv!r}))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # closed before the command writes anything (it is still importing)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 141)  # 141: stopped by the closed pipe, as a shell reports it
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err


def test_old_spellings_still_work(tmp_path):
    args = build_parser().parse_args(["dispatch", "--in-dir", "c", "--partitions-dir", "a", "--out-dir", "o"])
    assert (args.dataset, args.assignment, args.out) == ("c", "a", "o")
    new = build_parser().parse_args(["dispatch", "--dataset", "c", "--assignment", "a", "--out", "o"])
    assert (new.dataset, new.assignment, new.out) == ("c", "a", "o")


def test_verbose_after_the_command():
    assert build_parser().parse_args(["inspect", "x.json", "-v"]).verbose is True
    assert build_parser().parse_args(["-v", "inspect", "x.json"]).verbose is True
    assert build_parser().parse_args(["inspect", "x.json"]).verbose is False


@pytest.mark.parametrize(
    "argv, error",
    [
        (["train", "--epohcs", "3", "--part-config", "p.json"], "unknown flag --epohcs (did you mean --epochs?)"),
        (
            ["train", "--part-config", "p.json", "--epohcs=3", "--lrr", "0.1"],
            "unknown flags --epohcs (did you mean --epochs?), --lrr (did you mean --lr?)",
        ),
        (
            ["partition", "--dataset", "d", "--out", "o", "--num-prts", "3"],  # its required flag is "missing" too
            "unknown flag --num-prts (did you mean --num-parts?)",
        ),
        (["generate", "rmat", "--scael", "3", "--out", "x"], "unknown flag --scael (did you mean --scale?)"),
        (["partition", "--dataset", "d", "--out", "o", "--num-parts", "2", "--bogus"], "unknown flag --bogus"),
        (
            ["train", "--part-config", "p.json", "--epochs", "x"],
            "argument --epochs: expected an integer in [1, inf), got 'x'",
        ),
        (["inspect", "a.json", "b.json"], "unexpected argument b.json"),
    ],
)
def test_usage_errors_are_one_usage_line_and_the_error(argv, error, capsys):
    """The user sees the command's one-line usage (not the 30 lines of every flag) and what is wrong; a
    misspelt flag names the closest real one; exit code 2."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    path = " ".join(argv[:2] if argv[0] == "generate" else argv[:1])
    positional = " config" if argv[0] == "inspect" else ""
    assert out == ""
    assert err.splitlines() == [
        f"usage: graphshard {path} [options]{positional}; see graphshard {path} --help",
        f"graphshard {path}: error: {error}",
    ]


def test_every_command_reports_an_unknown_flag_itself(capsys):
    for path, _ in _commands(build_parser()):
        prog = " ".join(("graphshard", *path))
        assert main([*path, "--no-such-flag"]) == 2, prog
        lines = capsys.readouterr().err.splitlines()
        assert (
            len(lines) == 2
            and lines[0].startswith(f"usage: {prog} [options]")
            and lines[0].endswith(f"; see {prog} --help")
        ), lines
        assert lines[1] == f"{prog}: error: unknown flag --no-such-flag", lines


def test_a_misspelt_command_or_choice_names_the_closest(capsys):
    assert main(["trian", "--epochs", "3"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "usage: graphshard [options] COMMAND ...; see graphshard --help"
    assert (
        lines[1].startswith("graphshard: error: argument COMMAND: invalid choice: 'trian'")
        and lines[1].endswith("(did you mean train?)")
        and len(lines) == 2
    )
    assert main(["partition", "--dataset", "d", "--out", "o", "--num-parts", "2", "--objtype", "cot"]) == 2
    assert (
        capsys.readouterr().err.splitlines()[1]
        == "graphshard partition: error: argument --objtype: invalid choice: 'cot' (choose from 'cut', 'vol') "
        "(did you mean cut?)"
    )
