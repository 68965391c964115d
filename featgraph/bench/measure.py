"""Peak-memory and bandwidth helpers shared by the benchmarks (their timing helpers are ``featgraph.timing``)."""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

import torch

from ..backends.cpu import buffers
from ..graph.graph import release_freed_heap
from ..native.compiler import build
from ..native.sources import cpp_source
from ..timing import best_ms

CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS = Path("/proc/self/status")


def status_kb(field: str) -> int | None:
    """A field of ``/proc/self/status`` in kB (``VmRSS``, ``VmHWM``, ``RssAnon``, ...); None where it is absent."""
    for line in STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


class Peaks(NamedTuple):
    """What a call added at its peak, in MB: resident memory (the high-water mark) and, in a process started
    with ``counting_allocations``, the bytes allocated (None where not measured)."""

    resident_mb: float | None
    allocated_mb: float | None


def counting_allocations(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a worker process whose allocations are counted: ``native/cpp/allocations.cpp``, compiled,
    preloaded before anything the environment already preloads."""
    counter = str(build(cpp_source("allocations.cpp")))
    preload = " ".join(filter(None, [counter, env.get("LD_PRELOAD", "")]))
    return {**env, "LD_PRELOAD": preload}


def _allocation_counter() -> ctypes.CDLL | None:
    """This process's allocation counter where ``counting_allocations`` preloaded it, else None."""
    process = ctypes.CDLL(None)
    if not hasattr(process, "featgraph_allocated_peak"):
        return None
    for name in ("featgraph_allocated_bytes", "featgraph_allocated_peak"):
        getattr(process, name).restype = ctypes.c_int64
    return process


def peaks_extra_mb(fn: Callable[[], object]) -> Peaks:
    """What ``fn`` adds over what the process held before, at its peak, in MB (CPU).

    Resident memory: resets Linux's high-water mark (``echo 5 > /proc/self/clear_refs``) and reads ``VmHWM``
    afterwards (None where the kernel does not offer that). It counts the pages of program text and libraries
    ``fn`` runs for the first time and the heap pages glibc keeps after a free, which move it by 20-90 MB from
    process to process; the allocated bytes (in a process started with ``counting_allocations``: every block
    of glibc's malloc family and every large anonymous mapping) count only what was asked for, the same in
    every run. The output pool's free buffers are released first, so the outputs ``fn`` makes count, as they
    would in a process that had not run it before. Garbage is collected and the C heap's free pages handed back
    first too: a collection inside ``fn`` that freed earlier tensors, or an allocation served from free heap
    pages still resident, would hide ``fn``'s memory (a CI run read 0 MB for a 64 MiB output three times in a
    row).
    """
    gc.collect()
    buffers.release()
    release_freed_heap()
    counter = _allocation_counter()
    try:
        before = status_kb("VmRSS")
        CLEAR_REFS.write_text("5")
    except OSError:
        before = None
    if counter is not None:
        counter.featgraph_allocated_peak_reset()
        allocated_before = counter.featgraph_allocated_bytes()
    result = fn()
    peak = status_kb("VmHWM") if before is not None else None
    allocated = None if counter is None else (counter.featgraph_allocated_peak() - allocated_before) / 1024**2
    del result
    resident = None if before is None or peak is None else max(0.0, (peak - before) / 1024)
    return Peaks(resident, allocated)


def peak_extra_mb(fn: Callable[[], object], device: torch.device | None = None) -> float | None:
    """Peak memory that ``fn`` adds over what the process held before, in MB: resident memory
    (``peaks_extra_mb``), or for a CUDA ``device`` the memory torch's allocator hands out there."""
    if device is not None and device.type == "cuda":
        return _cuda_peak_extra_mb(fn, device)
    return peaks_extra_mb(fn).resident_mb


def _cuda_peak_extra_mb(fn: Callable[[], object], device: torch.device) -> float:
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    result = fn()
    torch.cuda.synchronize(device)
    del result
    return (torch.cuda.max_memory_allocated(device) - before) / 1024**2


def copy_gbps(device: torch.device, megabytes: int = 1024, repeat: int = 10) -> float:
    """Device-to-device copy bandwidth, bytes read plus bytes written per second in GB/s (best of ``repeat``
    copies of ``megabytes``): the bound a gather-bound kernel's GB/s is read against."""
    source = torch.empty(megabytes * 2**20 // 4, device=device)
    target = torch.empty_like(source)
    ms = best_ms(lambda: target.copy_(source), repeat)
    return 2 * source.numel() * 4 / ms / 1e6
