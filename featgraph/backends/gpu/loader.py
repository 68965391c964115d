"""Write a generated Triton module to the disk cache (keyed by source hash) and import its ``run``.

Triton reads a kernel's source from its file, so generated code has to live in a real module. Files are
written under a temporary name and renamed into place, so processes building the same kernel at once
never import a half-written file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

from ..cpu.compiler import cache_dir


class TritonNotFoundError(RuntimeError):
    pass


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def module_path(source: str) -> Path:
    key = hashlib.sha256(source.encode()).hexdigest()[:24]
    path = cache_dir() / "triton"
    path.mkdir(parents=True, exist_ok=True)
    return path / f"fg_{key}.py"


@cache
def load(source: str) -> Callable:
    """The ``run`` function of the module generated as ``source``."""
    try:
        import triton  # noqa: F401
    except ImportError as error:
        raise TritonNotFoundError(
            "target='gpu' needs Triton: install PyTorch's CUDA build (it ships Triton) or `pip install triton`"
        ) from error
    path = module_path(source)
    if not path.exists():
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as tmp:
            tmp.write(source)
        os.replace(tmp.name, path)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run
