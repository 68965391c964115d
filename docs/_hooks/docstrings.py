"""MkDocs hook: every object the API reference renders has a docstring, so a missing one fails the strict build.

The reference pages name modules with mkdocstrings' ``::: module`` (optionally with a ``members:`` list). For each,
the public objects are the listed members, else the module's ``__all__``, else the public functions and classes it
defines; each must have a docstring, and so must the public methods a class defines itself.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import re
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.docstrings")


def _rendered(page: str) -> list[tuple[str, list[str] | None]]:
    """(module, explicit members or None) for each ``::: module`` block of a reference page."""
    blocks = []
    for match in re.finditer(r"^::: (\S+)\n((?:[ \t]+.*\n?)*)", page, flags=re.M):
        members = re.findall(r"^\s+- (\w+)\s*$", match[2], flags=re.M)
        blocks.append((match[1], members or None))
    return blocks


def _public(module) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is not None:
        return [n for n in names if not n.startswith("_")]
    return [
        n
        for n, obj in vars(module).items()
        if not n.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and getattr(obj, "__module__", None) == module.__name__
    ]


def _documented(obj) -> bool:
    """Whether ``obj`` has a docstring of its own making (a dataclass's generated signature is none)."""
    doc = inspect.getdoc(obj)
    generated = dataclasses.is_dataclass(obj) and inspect.isclass(obj) and (doc or "").startswith(f"{obj.__name__}(")
    return bool(doc) and not generated


def _resolve(path: str):
    """The module ``path`` names, else the object it names inside its parent module."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError:
        parent, _, name = path.rpartition(".")
        return getattr(importlib.import_module(parent), name)


def _missing(path: str, members: list[str] | None) -> list[str]:
    target = _resolve(path)
    missing = [] if _documented(target) else [path]
    if not inspect.ismodule(target):
        return missing + _missing_methods(path, target)
    for name in members or _public(target):
        obj = getattr(target, name)
        if not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismodule(obj)):
            continue  # constants and tables are described by the page that names them
        if not _documented(obj):
            missing.append(f"{path}.{name}")
        missing += _missing_methods(f"{path}.{name}", obj)
    return missing


def _missing_methods(path: str, obj) -> list[str]:
    """The public methods a class defines itself (inherited docstrings count) that have no docstring."""
    if not inspect.isclass(obj):
        return []
    return [
        f"{path}.{attr}"
        for attr, value in vars(obj).items()
        if not attr.startswith("_") and inspect.isfunction(value) and not _documented(getattr(obj, attr))
    ]


def on_post_build(config, **kwargs) -> None:
    """Warn (an error under ``--strict``) for each rendered object without a docstring."""
    for page in sorted(Path(config["docs_dir"], "reference").glob("*.md")):
        for path, members in _rendered(page.read_text()):
            for name in _missing(path, members):
                log.warning("%s: %s has no docstring", page.name, name)
