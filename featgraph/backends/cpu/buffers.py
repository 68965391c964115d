"""Recycled memory for the large outputs of CPU kernels.

glibc's ``malloc`` serves a request above its mmap threshold (dynamic, at most 32 MiB) with a fresh ``mmap``
and unmaps it on free, so an output that large starts as untouched pages: the kernel that writes it first takes
a page fault and a kernel-side zeroing for each 4 KiB (filling a fresh 50,000 x 256 float32 output costs about a
quarter of that SpMM's time, ``featgraph bench output-pool``). Outputs of 32 MiB and more therefore come from
here: fresh memory backed by transparent huge pages where Linux offers them (its "always" or "madvise" mode),
which faults once per 2 MiB (filling a fresh 51 MB output takes 1.4x-1.7x a recycled one's time instead of
9x-11x) and goes back to the system when it dies. Where Linux offers no huge pages, or with
``FEATGRAPH_POOL_HUGE=1`` (speed over peak memory: the kernels writing fresh ones take longer, GraphSAGE's
under DGL about 1.5x; docs/design.md, "Recycled outputs"), the pool keeps such buffers after their tensors die
and hands them out again, as PyTorch's CUDA caching allocator does on the GPU. Every tensor or view of a pooled
buffer holds the array it was made from (``torch.from_numpy`` keeps that array alive), and the pool watches
that array through a weak reference, so memory a live tensor uses is never handed out twice.

A free buffer cannot serve torch's own allocations, so one waiting for a later request adds to the peak: a free
buffer goes back to the system once more than ``MAX_IDLE_REQUESTS`` later requests have passed it over (a
training loop's outputs are taken again within one or two), and ``FEATGRAPH_POOL_MB`` bounds the free memory
kept (default 128; 0 keeps none). Smaller outputs come from glibc's heap, which recycles them as fast as a pool
would (``featgraph bench output-pool --dims 32 64 128``) and whose freed memory torch's allocations share: a
pooled one waited through the step's other allocations (20-25 MB of GAT's and GraphSAGE's peaks under DGL).
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

MMAP_THRESHOLD_MAX = 32 * 1024**2  # glibc's largest mmap threshold: larger requests always get fresh pages
MIN_POOLED_BYTES = MMAP_THRESHOLD_MAX  # below it glibc's heap recycles, and shares freed memory with torch
SIZE_CLASS = 1024**2  # buffers are kept in whole MiB, so near-equal requests share them
FIT_SLACK = 0.125  # a request may take a free buffer up to this much larger than it
ALIGNMENT = 64  # one cache line: the kernels' vector loads never straddle two at a row start
DEFAULT_POOL_MB = 128
MAX_IDLE_REQUESTS = 2  # a free buffer passed over by more later requests than this goes back to the system
HUGE_PAGE = 2 * 1024**2
TRANSPARENT_HUGE_PAGES = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _pool_bytes_from_env(default_mb: float) -> int:
    value = os.environ.get("FEATGRAPH_POOL_MB") or str(default_mb)  # set but empty: the default
    try:
        megabytes = float(value)
    except ValueError:
        raise ValueError(f"FEATGRAPH_POOL_MB must be a number of MiB, got {value!r}") from None
    if not 0 <= megabytes < math.inf:
        raise ValueError(f"FEATGRAPH_POOL_MB must be a finite number of MiB >= 0, got {value!r}")
    return int(megabytes * 1024**2)


def _keep_huge_from_env() -> bool:
    """``FEATGRAPH_POOL_HUGE``: 1 keeps outputs in huge pages for reuse too, 0 or unset gives them back."""
    value = os.environ.get("FEATGRAPH_POOL_HUGE", "")
    if value not in ("", "0", "1"):
        raise ValueError(f"FEATGRAPH_POOL_HUGE must be 0 or 1, got {value!r}")
    return value == "1"


def huge_pages_available(setting: Path = TRANSPARENT_HUGE_PAGES) -> bool:
    """Whether Linux backs anonymous memory advised ``MADV_HUGEPAGE`` with 2 MiB pages: transparent huge pages
    in their "always" or "madvise" mode."""
    try:
        mode = setting.read_text()
    except OSError:
        return False
    return hasattr(mmap, "MADV_HUGEPAGE") and ("[always]" in mode or "[madvise]" in mode)


def huge_page_memory(nbytes: int) -> np.ndarray:
    """``nbytes`` of fresh anonymous memory starting on a 2 MiB boundary and advised to be backed by huge pages,
    unmapped when the array and every view of it die. Its first write faults once per 2 MiB instead of once
    per 4 KiB."""
    if type(nbytes) is not int or nbytes < 0:
        raise ValueError(f"nbytes must be a whole number of bytes >= 0, got {nbytes!r}")
    extent = -(-nbytes // HUGE_PAGE) * HUGE_PAGE
    region = mmap.mmap(-1, extent + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    whole = np.frombuffer(region, dtype=np.uint8)
    start = (-whole.ctypes.data) % HUGE_PAGE
    with contextlib.suppress(OSError, AttributeError):  # a kernel without huge pages: 4 KiB pages as ever
        region.madvise(mmap.MADV_HUGEPAGE, start, extent)
    return whole[start : start + nbytes]


def _tensor(memory: np.ndarray, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A ``dtype`` tensor of ``shape`` over the bytes of ``memory`` (uint8), which the tensor and its views keep
    alive."""
    return torch.from_numpy(memory).view(dtype).view(shape)


@dataclass
class _Buffer:
    memory: np.ndarray
    user: weakref.ref | None = None  # the array last handed out over ``memory``
    free_since: int | None = None  # the pool's request count when it was first seen free

    @property
    def free(self) -> bool:
        return self.user is None or self.user() is None


class BufferPool:
    """Hands out CPU tensors of at least ``min_bytes`` from buffers it keeps; smaller ones come from torch.

    ``max_free_bytes`` bounds the memory held by buffers no tensor uses (least recently used go first);
    ``huge_pages``: buffers above glibc's largest mmap threshold are fresh memory backed by huge pages
    (``huge_page_memory``), given back when they die unless ``keep_huge`` (smaller ones come from glibc's
    heap, which torch's allocations share); ``max_idle_requests``: a free buffer passed over by more later
    requests than this is dropped (None: kept until the bound needs its memory)."""

    def __init__(
        self,
        max_free_bytes: int,
        min_bytes: int = MIN_POOLED_BYTES,
        huge_pages: bool = False,
        max_idle_requests: int | None = MAX_IDLE_REQUESTS,
        keep_huge: bool = False,
    ) -> None:
        for name, value in (("max_free_bytes", max_free_bytes), ("min_bytes", min_bytes)):
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} must be a whole number of bytes >= 0, got {value!r}")
        if max_idle_requests is not None and (type(max_idle_requests) is not int or max_idle_requests < 0):
            raise ValueError(f"max_idle_requests must be None or a whole number >= 0, got {max_idle_requests!r}")
        for name, value in (("huge_pages", huge_pages), ("keep_huge", keep_huge)):
            if type(value) is not bool:
                raise ValueError(f"{name} must be True or False, got {value!r}")
        self.max_free_bytes = max_free_bytes
        self.min_bytes = min_bytes
        self.huge_pages = huge_pages
        self.keep_huge = keep_huge
        self._buffers: list[_Buffer] = []  # least recently used first
        self._lock = threading.Lock()
        self.max_idle_requests = max_idle_requests
        self._requests = 0  # pooled requests so far: the clock that ages free buffers

    def empty(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        """An uninitialised tensor: in fresh huge pages where it is large enough for them (recycled only with
        ``keep_huge``), else in a recycled buffer where the request is large enough and the pool keeps memory,
        else from torch."""
        shape = tuple(int(extent) for extent in shape)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes < self.min_bytes:
            return torch.empty(shape, dtype=dtype)
        if self._in_huge_pages(nbytes) and (self.max_free_bytes <= 0 or not self.keep_huge):
            return _tensor(huge_page_memory(nbytes), shape, dtype)
        if self.max_free_bytes <= 0:
            return torch.empty(shape, dtype=dtype)
        size = -(-nbytes // SIZE_CLASS) * SIZE_CLASS
        with self._lock:
            buffer = self._take(size)
            start = (-buffer.memory.ctypes.data) % ALIGNMENT
            array = buffer.memory[start : start + nbytes]
            buffer.user = weakref.ref(array, self._freed)
            return _tensor(array, shape, dtype)

    def zeros(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        return self.empty(shape, dtype).zero_()

    def _take(self, size: int) -> _Buffer:
        """The smallest free buffer of ``size`` to ``size * (1 + FIT_SLACK)`` usable bytes (mini-batches ask for
        a slightly different size each step), moved to the most recently used end, else a new one. A new one
        replaces the free buffers just too small for it (``size / (1 + FIT_SLACK)`` to ``size``): the same
        request's earlier, smaller steps, which it now serves, so they are not kept beside it."""
        self._age()
        fits = [
            (buffer.memory.nbytes, n)
            for n, buffer in enumerate(self._buffers)
            if buffer.free and size <= buffer.memory.nbytes - ALIGNMENT <= size * (1 + FIT_SLACK)
        ]
        if fits:
            buffer = self._buffers.pop(min(fits)[1])
            buffer.free_since = None
            self._buffers.append(buffer)
            return buffer
        self._buffers = [
            buffer
            for buffer in self._buffers
            if not (buffer.free and size / (1 + FIT_SLACK) <= buffer.memory.nbytes - ALIGNMENT < size)
        ]
        self._trim(self.max_free_bytes - size)
        if self._in_huge_pages(size):
            memory = huge_page_memory(size + ALIGNMENT)
        else:
            memory = np.empty(size + ALIGNMENT, dtype=np.uint8)
        buffer = _Buffer(memory)
        self._buffers.append(buffer)
        return buffer

    def _in_huge_pages(self, nbytes: int) -> bool:
        """Whether fresh memory of ``nbytes`` comes as huge pages: where asked for, above glibc's largest mmap
        threshold (below it glibc's heap serves, whose freed memory torch's allocations share)."""
        return self.huge_pages and nbytes >= MMAP_THRESHOLD_MAX

    def _age(self) -> None:
        """Count a request; note when each free buffer was first seen free, and drop those that more than
        ``max_idle_requests`` requests have passed over since."""
        self._requests += 1
        for buffer in self._buffers:
            if buffer.free and buffer.free_since is None:
                buffer.free_since = self._requests
        if self.max_idle_requests is not None:
            oldest = self._requests - self.max_idle_requests
            self._buffers = [b for b in self._buffers if not (b.free and b.free_since < oldest)]

    def _freed(self, _: weakref.ref) -> None:
        """A handed-out array died: drop the least recently used free buffers beyond ``max_free_bytes`` now,
        not at the next request, so memory the caller freed does not stay held while other allocations grow.
        Skipped where the pool's lock is held (this runs wherever the last reference goes, possibly inside
        the pool's own ``empty``, which trims before it allocates)."""
        if self._lock.acquire(blocking=False):
            try:
                self._trim(self.max_free_bytes)
            finally:
                self._lock.release()

    def _trim(self, keep_bytes: int) -> None:
        """Drop the least recently used free buffers until at most ``keep_bytes`` of free ones remain."""
        excess = sum(b.memory.nbytes for b in self._buffers if b.free) - max(0, keep_bytes)
        kept = []
        for buffer in self._buffers:
            if buffer.free and excess > 0:
                excess -= buffer.memory.nbytes
            else:
                kept.append(buffer)
        self._buffers = kept

    @property
    def free_bytes(self) -> int:
        with self._lock:
            return sum(b.memory.nbytes for b in self._buffers if b.free)

    def release(self) -> None:
        """Give every free buffer back to the system (buffers still in use stay until they are free)."""
        with self._lock:
            self._trim(0)


POOL = BufferPool(
    _pool_bytes_from_env(DEFAULT_POOL_MB), huge_pages=huge_pages_available(), keep_huge=_keep_huge_from_env()
)


def empty(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised CPU tensor from the process-wide pool."""
    return POOL.empty(shape, dtype)


def zeros(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A zero-filled CPU tensor from the process-wide pool."""
    return POOL.zeros(shape, dtype)


def contiguous(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` itself when contiguous, else a contiguous copy (pooled on the CPU): e.g. the expanded
    gradient that ``out.sum().backward()`` hands a backward pass."""
    if tensor.is_contiguous():
        return tensor
    if tensor.device.type != "cpu":
        return tensor.contiguous()
    return empty(tensor.shape, tensor.dtype).copy_(tensor)


def release() -> None:
    """Free the process-wide pool's unused buffers."""
    POOL.release()
