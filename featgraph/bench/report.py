"""What every benchmark suite reports alongside its rows: the machine, table cells, the JSON file."""

from __future__ import annotations

import json
import platform
from typing import Any

import torch

from ..backends import toolchain


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {torch.get_num_threads()} torch threads, {toolchain.cxx_version()}"


def cell(value: float | None, spec: str) -> str:
    """A table cell: the number formatted, or "-" where there is none."""
    return "-" if value is None else format(value, spec)


def write_json(path: str | None, rows: list[dict[str, Any]], **extra: Any) -> None:
    """``{"machine": ..., **extra, "rows": rows}`` to ``path`` (nothing when no path was asked for)."""
    if path:
        with open(path, "w") as f:
            json.dump({"machine": machine(), **extra, "rows": rows}, f, indent=1)
