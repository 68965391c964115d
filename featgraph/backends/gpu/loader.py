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


def interpreter_scalar_index() -> None:
    """Let Triton's interpreter take a runtime scalar as a loop bound under NumPy 2.4 and later.

    The interpreter holds a scalar as a one-element array, and up to Triton 3.6 its ``tensor.__index__`` is
    ``int(array)``, which NumPy 2.4 refuses for an array with a dimension ("only 0-dimensional arrays can be
    converted to Python scalars", triton-lang/triton#9171), so every kernel loop with a runtime bound
    (``for q0 in range(0, total, BLOCK_E)``) fails there. Compiled kernels never call it. This wraps the
    interpreter's patching of ``tl.tensor`` so that ``__index__`` reads the one element, as later Triton does;
    on those versions it changes nothing. Called under the interpreter when a generated module is loaded and when
    the tensor-core kernels are imported; idempotent."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "featgraph_scalar_index", False):
        return

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    patch_lang_tensor.featgraph_scalar_index = True
    interpreter._patch_lang_tensor = patch_lang_tensor


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
    if interpreting():
        interpreter_scalar_index()
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
