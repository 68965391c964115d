"""Write a generated Triton module to the disk cache (keyed by source hash) and import its ``run``.

Triton reads a kernel's source from its file, so generated code has to live in a real module. Files are
written under a temporary ``.build-<pid>-*`` name and renamed into place, so processes building the same
kernel at once never import a half-written file; a module whose text is not the generated source (a
truncated or damaged file) is written again, with a warning, before it is imported.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import types
import warnings
from collections.abc import Callable
from functools import cache
from pathlib import Path

from ...native.compiler import BUILD_PREFIX, cache_dir, remove_stale_builds, writing


class TritonNotFoundError(RuntimeError):
    pass


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def module_path(source: str) -> Path:
    key = hashlib.sha256(source.encode()).hexdigest()[:24]
    path = cache_dir() / "triton"
    with writing(path):
        path.mkdir(parents=True, exist_ok=True)
    return path / f"fg_{key}.py"


def _holds(path: Path, source: str) -> bool:
    """Whether the module file at ``path`` is exactly ``source``."""
    try:
        return path.read_bytes() == source.encode()
    except OSError:
        return False


def _write(path: Path, source: str) -> None:
    """Put ``source`` at ``path`` by an atomic rename (clearing temporaries that killed writers left)."""
    with writing(path.parent):
        remove_stale_builds(path.parent)
        prefix = f"{BUILD_PREFIX}{os.getpid()}-"
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, prefix=prefix, suffix=".tmp", delete=False
        ) as tmp:
            tmp.write(source)
        os.replace(tmp.name, path)


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
    if not _holds(path, source):
        if path.exists():
            warnings.warn(
                f"featgraph is rewriting the kernel module {path}: its text is not the kernel's", stacklevel=2
            )
        _write(path, source)
    # compiled from the source in hand (the file, now equal to it, is what Triton reads), so no bytecode
    # cache beside the file can go stale or be damaged
    module = types.ModuleType(path.stem)
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module.run
