"""Files a distributed job writes and reads back (partitions, checkpoints): written whole under a temporary
name, flushed to disk and renamed, so a crash mid-write leaves the previous file; read back against the
SHA-256 digest recorded at write time, so a truncated, damaged or foreign file is reported by name, with how
to rebuild it, instead of as an unpickling or I/O error that names nothing."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
from pathlib import Path
from typing import Any

import torch


def write_atomically(path: Path, payload: Any) -> str:
    """``torch.save(payload)`` to ``path`` through a temporary file in the same directory, flushed and renamed
    over ``path``; the SHA-256 digest of the bytes written."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    data = buffer.getvalue()
    _replace(path, data)
    return hashlib.sha256(data).hexdigest()


def write_text_atomically(path: Path, text: str) -> None:
    """``text`` to ``path`` as ``write_atomically`` writes bytes."""
    _replace(path, text.encode())


def _replace(path: Path, data: bytes) -> None:
    """``data`` written whole under a temporary name beside ``path``, flushed to disk, then renamed over it."""
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)


def read_verified(path: Path, remedy: str, digest: str | None = None) -> Any:
    """What ``write_atomically`` wrote to ``path`` (tensors, lists, dicts and numbers only: ``weights_only``),
    checked against ``digest`` where one was recorded. A missing file raises ``FileNotFoundError``; one that is
    damaged (truncated, altered, not a torch file) a ``ValueError`` naming it and ending with ``remedy``."""
    if not path.is_file():
        raise FileNotFoundError(f"{str(path)!r} is missing; {remedy}")
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ValueError(f"{str(path)!r} cannot be read ({err}); {remedy}") from err
    if digest is not None and hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(f"{str(path)!r} is damaged: its contents differ from what was written; {remedy}")
    try:
        return torch.load(io.BytesIO(data), weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, KeyError, AttributeError) as err:
        raise ValueError(
            f"{str(path)!r} is damaged: not a file featgraph wrote ({type(err).__name__}); {remedy}"
        ) from err


def digest_file(path: Path) -> Path:
    """Where ``write_with_digest`` keeps ``path``'s digest."""
    return path.with_name(path.name + ".sha256")


def write_with_digest(path: Path, payload: Any) -> None:
    """``write_atomically``, its digest then written beside it (``digest_file``): for a file with no index of
    its own to record the digest in, such as a checkpoint."""
    write_text_atomically(digest_file(path), write_atomically(path, payload))


def read_with_digest(path: Path, remedy: str) -> Any:
    """``read_verified`` against the digest beside ``path``, where there is one."""
    digest = digest_file(path)
    return read_verified(path, remedy, digest.read_text().strip() if digest.is_file() else None)
