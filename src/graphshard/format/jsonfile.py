"""Reading the JSON files users give (dataset, chunked and assignment metadata) with errors that name them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import InputError


def read_json_object(path: Path, error: type[Exception] = InputError) -> dict[str, Any]:
    """The JSON object in ``path``; ``error`` naming the file if it is not valid JSON or not an object."""
    try:
        raw = json.loads(Path(path).read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise error(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise error(f"{path}: JSON nested too deeply") from None
    if not isinstance(raw, dict):
        raise error(f"{path}: must hold a JSON object")
    return raw
