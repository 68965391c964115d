"""Wall-clock timing of a function: the best of repeated runs, waiting for queued GPU work. The tuner measures its
candidates with it and the benchmarks their rows, so it sits below both."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import torch


def best_ms(fn: Callable[[], object], repeat: int = 5, warmup: int = 1) -> float:
    """Fastest of ``repeat`` runs after ``warmup`` runs, in milliseconds (waiting for queued GPU work, so
    CUDA kernels are timed to completion)."""
    return interleaved_best_ms({"fn": fn}, repeat, warmup)["fn"]


def interleaved_best_ms(fns: Mapping[str, Callable[[], object]], repeat: int = 5, warmup: int = 1) -> dict[str, float]:
    """Fastest of ``repeat`` runs of each function, in milliseconds, the functions taking turns run by run.

    On a shared machine a slow spell then hits every implementation of a row alike, so their ratio holds
    even where the absolute times do not (a shared machine's times can move by 2x within minutes). With
    several functions each timed run follows an untimed run of the same function, so it finds the allocator
    as a loop calling it would leave it, not with memory another implementation's large buffers handed back
    to the kernel, which its fresh output would page-fault in (docs/design.md, "Recycled outputs")."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            if len(fns) > 1:
                fn()
            sync()
            start = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - start)
    return {name: min(t) * 1e3 for name, t in times.items()}
