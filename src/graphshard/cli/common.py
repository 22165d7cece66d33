"""Flags shared by several commands, so each concept has one name, one parser and one help text."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Iterable
from typing import Any, ClassVar, NoReturn, TypeVar, overload

from ..distributed.transport.liveness import DEFAULT_LOST_AFTER
from ..partition.methods import METHODS

HOST_HELP = (
    "address every socket of the run listens on (127.0.0.1: this machine only); beyond loopback every process "
    "needs the job's secret (GRAPHSHARD_SECRET or --secret-file), or --insecure"
)
# Old spellings, still accepted but not shown in --help: one name per concept.
HIDDEN_ALIASES = {"--out-dir", "--in-dir", "--partitions-dir"}
_N = TypeVar("_N")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows every option's default (when it has a meaningful one) after its help text, and hides the old
    spellings in :data:`HIDDEN_ALIASES`."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        shown = [s for s in action.option_strings if s not in HIDDEN_ALIASES]
        if len(shown) == len(action.option_strings):
            return super()._format_action_invocation(action)
        copy = argparse.Action(shown, action.dest, action.nargs, metavar=action.metavar)
        return super()._format_action_invocation(copy)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or default is None
            or default is False
            or default == argparse.SUPPRESS
            or not action.option_strings
            or isinstance(action, (argparse._HelpAction, argparse._VersionAction))
        ):
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class Parser(argparse.ArgumentParser):
    """A parser whose errors are two lines: a short usage line of the command at fault (pointing to its
    ``--help``) and the error, which for a misspelt flag or choice names the closest known one. Every
    command is a :class:`Parser` (sub-commands are made with the class of their parent), so a flag no command
    knows is reported by the command it was given to (``graphshard train: error: unknown flag --epohcs (did
    you mean --epochs?)``), not as the top-level usage."""

    last_error: ClassVar[str | None] = None  # the latest usage error, ``PROG: error: MESSAGE`` (told to peers)

    def short_usage(self) -> str:
        """``usage: graphshard train [options]; see graphshard train --help`` (positionals named)."""
        fmt = self._get_formatter()
        shown = [
            fmt._format_args(a, fmt._get_default_metavar_for_positional(a))
            for a in self._get_positional_actions()
            if a.help is not argparse.SUPPRESS
        ]
        return f"usage: {' '.join([self.prog, '[options]', *shown])}; see {self.prog} --help"

    def error(self, message: str) -> NoReturn:
        if message.startswith(("the following arguments are required", "one of the arguments")):  # misspelt?
            unknown = [a for a in getattr(self, "_given", []) if self._is_unknown_flag(a)]
            message = self._unknown(unknown) if unknown else message
        Parser.last_error = f"{self.prog}: error: {message}"
        self.exit(2, f"{self.short_usage()}\n{self.prog}: error: {message}\n")

    @overload
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: None = None
    ) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(self, args: Iterable[str] | None, namespace: _N) -> tuple[_N, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: _N) -> tuple[_N, list[str]]: ...
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: _N | None = None
    ) -> tuple[argparse.Namespace | _N, list[str]]:
        given = list(sys.argv[1:] if args is None else args)
        self._given = given[: given.index("--")] if "--" in given else given
        parsed, extras = super().parse_known_args(given, namespace)
        if extras:  # what none of this parser's flags took (a sub-command, a Parser too, has reported its own)
            self.error(self._unknown(extras))
        return parsed, extras

    def _is_unknown_flag(self, arg: str) -> bool:
        """``arg`` looks like a flag that is neither one of this parser's nor an unambiguous abbreviation."""
        if not arg.startswith("-") or len(arg) < 2 or self._negative_number_matcher.match(arg):
            return False
        name = arg.split("=", 1)[0]
        return name not in self._option_string_actions and not (
            name.startswith("--") and sum(s.startswith(name) for s in self._option_string_actions) == 1
        )

    def _unknown(self, extras: list[str]) -> str:
        """``unknown flag --epohcs (did you mean --epochs?)``; ``unexpected argument x`` without flags."""
        flags = [a for a in extras if a in getattr(self, "_given", extras) and self._is_unknown_flag(a)]
        if not flags:
            return f"unexpected argument{'s' if len(extras) > 1 else ''} {' '.join(extras)}"
        known = {
            s.lstrip("-"): s
            for a in self._actions
            if a.help is not argparse.SUPPRESS
            for s in a.option_strings
            if s not in HIDDEN_ALIASES
        }
        said = []
        for flag in flags:
            name = flag.split("=", 1)[0]
            close = difflib.get_close_matches(name.lstrip("-"), list(known), n=1)  # the dashes say nothing
            said.append(f"{name} (did you mean {known[close[0]]}?)" if close else name)
        return f"unknown flag{'s' if len(said) > 1 else ''} {', '.join(said)}"

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """An invalid choice (a command, ``--method``, ...) names the closest valid one."""
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            close = difflib.get_close_matches(str(value), [str(c) for c in action.choices or ()], n=1)
            if not close:
                raise
            raise argparse.ArgumentError(action, f"{exc.message} (did you mean {close[0]}?)") from None


def command(sub: Any, name: str, help_text: str, description: str | None = None) -> argparse.ArgumentParser:
    """A sub-command parser with the shared formatter and ``-v`` (also accepted after the command)."""
    p = sub.add_parser(name, help=help_text, description=description or help_text, formatter_class=HelpFormatter)
    # a value such as ``-1,-1`` (every neighbour on both layers) is a value, not an unknown flag
    p._negative_number_matcher = re.compile(r"^-\d+(,-?\d+)*$|^-\d*\.\d+$")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="log each phase (time, peak memory), on every rank",
    )
    return p


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a positive integer, got 0")
    return value


def _number(text: str, ok: Any, wanted: str) -> float:
    """``text`` as a float for which ``ok(value)`` holds; else an argparse error saying ``wanted``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {wanted}, got {text}")
    return value


def positive_float(text: str) -> float:
    return _number(text, lambda v: v > 0, "a positive number")


def non_negative_float(text: str) -> float:
    return _number(text, lambda v: 0 <= v < float("inf"), "a non-negative number")


def fraction(text: str) -> float:
    """A number in (0, 1]."""
    return _number(text, lambda v: 0 < v <= 1, "a number in (0, 1]")


def seed_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed (non-negative integer)")


def overwrite_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="write into an output directory graphshard did not create (or that holds another graph's "
        "or another kind of output): what graphshard writes replaces entries of the same name, "
        "other files are kept; without it such a directory is refused",
    )


def disk_check_flag(p: argparse.ArgumentParser) -> None:
    """``--no-disk-check``: every writing step's override of its free-space check."""
    p.add_argument(
        "--no-disk-check",
        dest="check_disk",
        action="store_false",
        help="skip the check that refuses to start when the predicted peak of disk (plus a margin of 5 %% and "
        "64 MiB) exceeds the free space where the output goes (see 'graphshard plan')",
    )


def out_flag(p: argparse.ArgumentParser, help_text: str, required: bool = True, default: str | None = None) -> None:
    """``--out``: every command's output (``--out-dir`` is the old spelling)."""
    p.add_argument("--out", "--out-dir", dest="out", required=required, default=default, help=help_text)


def dataset_flag(p: argparse.ArgumentParser, help_text: str, required: bool = True) -> None:
    """``--dataset``: every command's input graph directory (``--in-dir`` is the old spelling)."""
    p.add_argument("--dataset", "--in-dir", dest="dataset", required=required, help=help_text)


def method_flag(p: argparse.ArgumentParser, help_text: str = "how nodes are assigned to partitions") -> None:
    p.add_argument("--method", default="metis", choices=METHODS, help=help_text)


def balance_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--balance-ntypes",
        metavar="train|FILE.npy",
        help="'train': balance every node type and its training nodes; or a .npy of one integer "
        "class per node (node types in order); metis and random",
    )
    p.add_argument(
        "--balance-edges",
        action="store_true",
        help="balance in-degree (the edges each partition stores) too: metis, kaminpar and stream",
    )
    p.add_argument("--objtype", default="cut", choices=["cut", "vol"], help="METIS objective")


def cluster_flags(
    p: argparse.ArgumentParser,
    num_procs_help: str | None,
    required: bool = False,
    host_flag: str = "--host",
    *,
    lost: str = "the run stops, naming it",
) -> None:
    """``--num-procs`` (unless ``num_procs_help`` is None), ``--host`` (or ``host_flag``: where a command's own
    ``--host`` means something else), ``--timeout``, ``--heartbeat-timeout`` (``lost``: what a lost rank
    brings): how a multi-process command starts its ranks."""
    if num_procs_help is not None:
        p.add_argument("--num-procs", type=positive_int, required=required, help=num_procs_help)
    what = (
        HOST_HELP
        if host_flag == "--host"
        else HOST_HELP.replace("every socket of the run listens", "the ranks' own sockets listen")
    )
    p.add_argument(host_flag, default="127.0.0.1", help=what)
    p.add_argument("--timeout", type=positive_float, default=300.0, help="seconds any distributed wait may take")
    p.add_argument(
        "--heartbeat-timeout",
        type=non_negative_float,
        default=DEFAULT_LOST_AFTER,
        help=f"seconds without a heartbeat after which a rank (its link, process or host) is lost and {lost} (0: off)",
    )
    security_flags(p)


def security_flags(p: argparse.ArgumentParser) -> None:
    """``--secret-file``, ``--insecure`` and ``--tls-cert/--tls-key/--tls-ca``: how the ranks' channels know each
    other, and whether they encrypt (see :mod:`graphshard.distributed.transport.handshake` and
    :mod:`graphshard.distributed.transport.tls`; applied by :func:`apply_security`)."""
    p.add_argument(
        "--secret-file",
        metavar="FILE",
        help="file holding the job's secret, the same for every process (else GRAPHSHARD_SECRET; --num-procs "
        "makes one per run): every connection between processes proves it before any request is read",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="listen beyond loopback without a secret (a network you trust: anyone on it could send requests)",
    )
    for flag, what in (
        ("--tls-cert", "this process's certificate (PEM)"),
        ("--tls-key", "its private key (PEM)"),
        ("--tls-ca", "the CA that signed every process's certificate (PEM)"),
    ):
        p.add_argument(flag, metavar="FILE", help=f"TLS on the connections between processes (all three): {what}")


def apply_security(args: argparse.Namespace) -> None:
    """Hand ``--secret-file``, ``--insecure`` and the TLS files to this process and the ranks it starts (their
    environment); the files are read now, so that a bad one is named before anything starts."""
    import logging
    import os

    from ..distributed.transport import handshake, tls

    if getattr(args, "secret_file", None):
        os.environ[handshake.SECRET_FILE_ENV] = os.path.abspath(args.secret_file)
        os.environ.pop(handshake.SECRET_ENV, None)  # the file given wins over the environment's
        handshake.job_key()
    for name, env in (("tls_cert", tls.CERT_ENV), ("tls_key", tls.KEY_ENV), ("tls_ca", tls.CA_ENV)):
        if getattr(args, name, None):
            os.environ[env] = os.path.abspath(getattr(args, name))
    tls.tls_from_env()
    if getattr(args, "insecure", False):
        os.environ[handshake.INSECURE_ENV] = "1"
        logging.getLogger("graphshard.notice").warning(
            "--insecure: without a job secret, whoever reaches the ranks' ports may send them requests"
        )


def partition_flags(p: argparse.ArgumentParser) -> None:
    """``--verify/--no-verify``: check the served partition files against their checksums first;
    ``--colocated/--no-colocated``: read the same host's other partitions in-process."""
    p.add_argument(
        "--verify",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="check the partition files each rank serves against the config's sha256 checksums first",
    )
    p.add_argument(
        "--colocated",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="read the partitions of other ranks on this host from the same files in-process instead of over RPC",
    )


def device_flag(p: argparse.ArgumentParser) -> None:
    """``--device cpu|cuda|auto``: what the model computes on (the rule of :mod:`graphshard.device.choice`)."""
    p.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda", "auto"],
        help="what the model computes on: cpu, cuda (the rank with LOCAL_RANK r takes cuda:r; more ranks than "
        "devices share them round robin), or auto (cuda where a device is visible); sampling stays on the CPU",
    )
