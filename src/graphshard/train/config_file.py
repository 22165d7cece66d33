"""``graphshard train`` config files: a flat mapping of option names (those of :class:`TrainOptions` and
:class:`LaunchOptions`, ``-`` or ``_`` alike) to values, in YAML (``.yaml``/``.yml``, read with PyYAML) or
JSON. Unknown keys and bad values are errors naming the file and the key. :func:`dump_config` writes the
full configuration back as YAML (readable without PyYAML's help too: every value is a JSON scalar or list)."""

from __future__ import annotations

import difflib
import json
import math
import os
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..format.textconfig import read_config_text
from ..tasks.fields import coerce, shown, specs
from ..tasks.options import LaunchOptions, TrainOptions


def option_specs() -> dict[str, Any]:
    """Every config key (training, then launch options) and its spec."""
    return specs(TrainOptions) | specs(LaunchOptions)


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """The options a config file sets, coerced to their types. Raises :class:`InputError` naming the file
    and the key at fault (with the closest known key for a misspelt one)."""
    path = Path(path)
    raw = read_config_text(path)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError(f"{path}: a config file is a mapping of option names to values, not {type(raw).__name__}")
    known = option_specs()
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name not in known or not (known[name].cli or known[name].config_only):
            close = difflib.get_close_matches(name, [k for k, s in known.items() if s.cli or s.config_only], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(
                f"{path}: unknown key {shown(key)}{hint}; the keys are the long flags of "
                "'graphshard train' (see --help or --print-config)"
            )
        try:
            out[name] = coerce(known[name], value)
        except ValueError as exc:
            raise InputError(f"{path}: key {shown(key)}: {exc}") from None
    return out


def build_options(values: dict[str, Any]) -> tuple[TrainOptions, LaunchOptions]:
    """The options ``values`` set (others at their defaults), checked (:class:`InputError` otherwise)."""
    names = {f.name for f in fields(LaunchOptions)}
    launch = LaunchOptions(**{k: v for k, v in values.items() if k in names})
    opts = TrainOptions(**{k: v for k, v in values.items() if k not in names})
    launch.check()
    opts.check()
    return opts, launch


def _yaml_value(value: Any) -> str:
    if isinstance(value, float):
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        mantissa, _, exponent = text.partition("e")
        if exponent and "." not in mantissa:  # YAML 1.1 readers take 1e-05 for a string, 1.0e-05 for a number
            text = f"{mantissa}.0e{exponent}"
        return text
    return json.dumps(value)


def dump_config(opts: TrainOptions, launch: LaunchOptions) -> str:
    """Every option of a run as a YAML config file (``--config`` reads it back to the same options)."""
    lines = ["# graphshard train configuration: every option, flags override (graphshard train --config FILE)"]
    for obj in (launch, opts):
        for name, spec in specs(obj).items():
            if spec.cli or (spec.config_only and getattr(obj, name) is not None):
                lines.append(f"{name}: {_yaml_value(getattr(obj, name))}")
    return "\n".join(lines) + "\n"


def option_defaults() -> dict[str, Any]:
    """Every option's default value."""
    out = {}
    for cls in (TrainOptions, LaunchOptions):
        for f in fields(cls):
            # every option has a default or a default factory (a field cannot have both)
            out[f.name] = f.default if f.default_factory is MISSING else f.default_factory()
    return out
