"""Typed option fields: one description per option drives its command-line flag, its config-file key and its
validation, so a value is checked the same way wherever it comes from.

An option is a dataclass field made with :func:`option`; its :class:`Spec` (in the field's metadata) says
the kind of value, its range or choices and its help text. :func:`coerce` turns a value from a flag
(text) or a config file (text, number, list, ...) into the option's type, or raises ``ValueError`` saying
what was expected."""

from __future__ import annotations

import dataclasses
import math
import reprlib
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

KINDS = ("int", "float", "str", "bool", "ints", "strs", "records")


@dataclass(frozen=True)
class Spec:
    """How one option is given and checked. ``low``/``high`` bound numbers (``open_low``/``open_high``:
    the bound itself is excluded); ``optional``: None is allowed (the default decides); ``cli``: the option
    has a flag; ``flag_only``: a flag but no config-file key (e.g. ``--config`` itself)."""

    kind: str
    help: str
    choices: tuple[str, ...] | None = None
    low: float | None = None
    _: KW_ONLY
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    optional: bool = False
    cli: bool = True
    config_only: bool = False  # no flag, but a config-file key (with cli False): values a flag cannot hold
    metavar: str | None = None
    int_items: tuple[int, int] | None = None  # ints: every item >= [0], or equal to [1] (e.g. fanout -1: all)

    def wanted(self) -> str:
        """What a valid value looks like, for error messages."""
        base = {
            "int": "an integer",
            "float": "a number",
            "str": "a string",
            "bool": "true or false",
            "ints": "a list of integers (or comma-separated text such as 10,10)",
            "strs": "a list of names (or comma-separated text)",
            "records": "a list of mappings of names to values (in a config file)",
        }[self.kind]
        if self.choices:
            base = f"one of {', '.join(self.choices)}"
        if self.low is not None or self.high is not None:
            lo = "(" if self.open_low else "["
            hi = ")" if self.open_high or self.high is None else "]"
            base += f" in {lo}{_show(self.low, '-inf')}, {_show(self.high, 'inf')}{hi}"
        if self.int_items is not None:
            base += f", each >= {self.int_items[0]} or {self.int_items[1]}"
        return base + (" (or null)" if self.optional else "")


def _show(v: float | None, none: str) -> str:
    return none if v is None else (str(int(v)) if float(v).is_integer() else str(v))


def option(default: Any, kind: str, help: str, **spec: Any) -> Any:
    """A dataclass field with its :class:`Spec` (mutable defaults are copied per instance)."""
    if kind not in KINDS:
        raise ValueError(f"unknown option kind {kind!r}")
    meta = {"spec": Spec(kind, help, **spec)}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def specs(cls: Any) -> dict[str, Spec]:
    """Every option of dataclass ``cls`` (or instance) by name."""
    return {f.name: f.metadata["spec"] for f in dataclasses.fields(cls) if "spec" in f.metadata}


class _Shown(reprlib.Repr):
    """A value as error messages show it: short values as ``repr`` does, long or deep ones cut (a YAML
    file of a few lines can hold a list of a billion items through aliases, or an integer of thousands
    of digits)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother, self.maxlong = 3, 80, 80, 40
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdict = 8

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:  # repr() of an integer of more than 4300 digits raises
            return f"<an integer of {x.bit_length()} bits>"
        return super().repr_int(x, level)


shown = _Shown().repr
INT64 = (-(2**63), 2**63 - 1)  # integer options are 64-bit integers (torch, NumPy)


def _number(value: Any, integer: bool) -> float | int:
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, str):
        text = value.strip()
        value = int(text) if integer else float(text)
    if integer:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            raise ValueError
        return value
    if not isinstance(value, (int, float)):
        raise ValueError
    return float(value)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
        return value.strip().lower() in ("true", "yes", "on", "1")
    raise ValueError


def _items(value: Any) -> list:
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ValueError


def _records(value: Any) -> list[dict[str, Any]]:
    """A non-empty list of mappings with name keys, copied (their values are checked by their option's user)."""
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError
    if not all(isinstance(v, dict) and all(isinstance(k, str) and k for k in v) for v in value):
        raise ValueError
    return [dict(v) for v in value]


def _convert(spec: Spec, value: Any) -> Any:
    if spec.kind == "records":
        return _records(value)
    if spec.kind == "int":
        return _number(value, True)
    if spec.kind == "float":
        return _number(value, False)
    if spec.kind == "bool":
        return _bool(value)
    if spec.kind == "str":
        if not isinstance(value, str) or not value:
            raise ValueError
        return value
    items = _items(value)
    if not items:
        raise ValueError
    if spec.kind == "ints":
        return [_number(v, True) for v in items]
    if not all(isinstance(v, str) and v for v in items):
        raise ValueError
    return [str(v) for v in items]


def _bad_item(spec: Spec, value: Any) -> str:
    """``: 'x' is not an integer`` for the first item of a list that is not of its kind."""
    if spec.kind not in ("ints", "strs"):
        return ""
    try:
        items = _items(value)
    except ValueError:
        return ""
    for item in items:
        try:
            _number(item, True) if spec.kind == "ints" else _convert(Spec("str", ""), item)
        except (ValueError, TypeError, OverflowError):
            return f" ({shown(item)} is not {'an integer' if spec.kind == 'ints' else 'a name'})"
    return ""


def _in_range(spec: Spec, v: float | int) -> bool:
    """``v`` within the spec's bounds (compared exactly: an integer is never converted to float, which
    overflows past 1e308)."""
    if isinstance(v, float) and math.isnan(v):
        return False
    if spec.low is not None and (v < spec.low or (spec.open_low and v == spec.low)):
        return False
    return spec.high is None or (v < spec.high or (not spec.open_high and v == spec.high))


def coerce(spec: Spec, value: Any) -> Any:
    """``value`` as the option's type (text is parsed), checked against its range and choices; raises
    ``ValueError("expected ..., got ...")``."""
    if value is None and spec.optional:
        return None
    try:
        out = _convert(spec, value)
    except (ValueError, TypeError, OverflowError):
        raise ValueError(f"expected {spec.wanted()}, got {shown(value)}{_bad_item(spec, value)}") from None
    values = out if isinstance(out, list) else [out]
    ok = True
    if spec.kind == "records":
        return out
    if spec.choices is not None:
        ok = all(v in spec.choices for v in values)
    if spec.kind in ("int", "float"):
        ok = ok and _in_range(spec, out)
    if spec.int_items is not None:
        ok = ok and all(v >= spec.int_items[0] or v == spec.int_items[1] for v in values)
    wide = spec.kind in ("int", "ints") and not all(INT64[0] <= v <= INT64[1] for v in values)
    if not ok or wide:
        beyond = " (beyond 64-bit integers)" if wide else ""
        raise ValueError(f"expected {spec.wanted()}, got {shown(value)}{beyond}")
    return out


def check_fields(obj: Any) -> dict[str, Any]:
    """Every option of dataclass instance ``obj`` coerced and checked; returns the coerced values. Raises
    ``ValueError("<name>: expected ..., got ...")`` for the first bad one."""
    out = {}
    for name, spec in specs(obj).items():
        try:
            out[name] = coerce(spec, getattr(obj, name))
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    return out
