"""Tuning results on disk, keyed by graph, op, shapes, dtype, target and machine.

One JSON file per key in ``$FEATGRAPH_TUNE_DIR`` (default ``~/.cache/featgraph/tuning``), written to a
temporary name and renamed into place, so concurrent tuners never leave a half-written record. A record
that cannot be read or used (damaged, or in another version's format) is reported with a warning and
treated as absent, so the kernel is tuned again and the record replaced; a directory that cannot be
written is reported with a warning too, and the tuned kernel is still returned.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import warnings
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import torch

from ..backends import cpu
from ..native import toolchain
from ..templates.kernel import Kernel
from .space import with_split


def tune_dir() -> Path:
    root = os.environ.get("FEATGRAPH_TUNE_DIR")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "featgraph" / "tuning"


@cache
def machine_signature(target: str = "cpu") -> str:
    """CPU model, core count and compiler (and the GPU's name for ``target="gpu"``): a result measured
    elsewhere is not trusted here."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name() if target == "gpu" and torch.cuda.is_available() else ""
    return f"{model}|{os.cpu_count()}|{toolchain.cxx_version()}|{gpu}"


def key(kernel: Kernel, threads: int) -> str:
    """Hash of the graph's fingerprint, the kernel's identity with every tunable choice reset to what the
    caller fixed (so the starting point does not matter), the target, threads and the machine."""
    params = type(kernel.spec.params)(**{n: getattr(kernel.spec.params, n) for n in kernel.fixed_params})
    identity = replace(kernel.spec, params=params, schedule=with_split(kernel.spec.schedule, None))
    machine = machine_signature(kernel.target)
    parts = [kernel.graph.fingerprint, cpu.source(identity), kernel.target, str(threads), machine]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def record_path(name: str) -> Path:
    return tune_dir() / f"{name}.json"


def discard(name: str, reason: str) -> None:
    """Report that the record ``name`` cannot be used and why; tuning afresh will replace it."""
    warnings.warn(f"featgraph ignores the tuning record {record_path(name)} ({reason}) and tunes afresh", stacklevel=3)


def load(name: str) -> dict[str, Any] | None:
    """The stored record, or None when there is none (or it cannot be read, which is reported)."""
    try:
        record = json.loads(record_path(name).read_text())
    except (FileNotFoundError, NotADirectoryError):  # nothing stored (a directory that is not one: see save)
        return None
    except (OSError, ValueError) as error:
        discard(name, f"unreadable: {error}")
        return None
    if not isinstance(record, dict):
        discard(name, "not a JSON object")
        return None
    return record


def save(name: str, record: dict[str, Any]) -> None:
    """Store ``record`` under ``name``; a directory that cannot be written is reported with a warning."""
    directory = tune_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=directory, prefix=".tmp-", suffix=".json", delete=False) as f:
            json.dump(record, f, indent=1)
        os.replace(f.name, directory / f"{name}.json")
    except OSError as error:
        warnings.warn(
            f"featgraph cannot store the tuning result in {directory} ({error.strerror or error}): make it "
            "writable or set FEATGRAPH_TUNE_DIR to a writable directory",
            stacklevel=3,
        )
