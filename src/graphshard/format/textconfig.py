"""Config files as text: YAML (``.yaml``/``.yml``, read with PyYAML's safe loader) or JSON, parsed into plain
values, every failure an :class:`~graphshard.errors.InputError` naming the file (and, for a YAML value that
cannot be built, its line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import InputError


def shown(value: Any) -> str:
    """``value`` as a message shows it: repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


YAML_HINT = (
    "reading YAML needs PyYAML (pip install pyyaml: it is a dependency of graphshard); a .json file needs nothing"
)


TOO_DEEP = "nested too deeply"
# what PyYAML's constructors raise, besides YAMLError, on a value they cannot build (2001-13-45 is read as a
# date: ValueError; "!!int ''": IndexError; "!!bool maybe": KeyError; "!!timestamp soon": AttributeError)
_CONSTRUCTION = (ValueError, LookupError, AttributeError, TypeError, ArithmeticError)


def parse_config_text(path: Path, text: str) -> Any:
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise InputError(f"{path}: {YAML_HINT}") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InputError(f"{path}: not valid YAML ({exc})") from None
        except RecursionError:
            raise InputError(f"{path}: {TOO_DEEP}") from None
        except _CONSTRUCTION as exc:
            raise InputError(_yaml_value_error(yaml, path, text, exc)) from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except ValueError as exc:
            raise InputError(f"{path}: not valid JSON ({exc})") from None
        except RecursionError:
            raise InputError(f"{path}: {TOO_DEEP}") from None
    raise InputError(f"{path}: a config file must end in .yaml, .yml or .json")


def _yaml_value_error(yaml: Any, path: Path, text: str, exc: Exception) -> str:
    """The message for a YAML value PyYAML parsed but could not build: the line of the first scalar that
    fails alone (each node visited once: aliases can make the tree exponentially larger than the text)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError, *_CONSTRUCTION):
        root = None
    loader = yaml.SafeLoader("")
    stack, seen = [root] if root is not None else [], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            try:
                loader.construct_object(node, deep=True)
            except (yaml.YAMLError, *_CONSTRUCTION) as err:
                return f"{path}, line {node.start_mark.line + 1}: YAML value {shown(node.value)} cannot be read ({err})"
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
        elif isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in reversed(node.value) for n in reversed(pair))
    return f"{path}: not valid YAML ({exc})"


def read_config_text(path: Path, what: str = "config file") -> Any:
    """The parsed contents of the YAML or JSON file ``path`` (``what`` it is, for the message when it cannot
    be read)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what} {path}: {exc}") from None
    return parse_config_text(path, text)
