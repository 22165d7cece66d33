"""Online inference: ``graphshard serve`` answers HTTP requests for predictions and embeddings of existing or
new nodes with a training checkpoint's model, over the partitioned graph (see :mod:`.service`). Needs the
``serve`` extra (``pip install 'graphshard[serve]'``: Starlette, uvicorn, prometheus-client)."""

from importlib import import_module
from typing import Any

_EXPORTS = {"ServeOptions": "service", "serve": "service"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'graphshard.serve' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
