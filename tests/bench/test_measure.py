import os
import subprocess
import sys
from pathlib import Path

import torch

from featgraph.backends.cpu import buffers
from featgraph.bench.measure import counting_allocations, peak_extra_mb, peaks_extra_mb


def test_peak_extra_mb_sees_a_large_temporary():
    peak = peak_extra_mb(lambda: torch.ones(50_000_000))  # 200 MB
    if peak is not None:  # None where /proc/self/clear_refs is unavailable
        assert 150 < peak < 400


def test_peak_extra_mb_counts_an_output_the_pool_could_have_served():
    shape = (16 * 1024**2,)  # 64 MiB of float32: pooled
    peaks = []
    for _ in range(3):  # the best of three: the kernel may reclaim other pages while one runs (seen once in CI)
        buffers.empty(shape, torch.float32).fill_(1.0)  # dies at once: its buffer stays in the pool, resident
        peaks.append(peak_extra_mb(lambda: buffers.empty(shape, torch.float32).fill_(1.0)))
    if peaks[0] is not None:
        assert max(peaks) > 50


def test_peak_extra_mb_on_a_gpu_counts_its_allocations(cuda):
    peak = peak_extra_mb(lambda: torch.ones(50_000_000, device=cuda), cuda)  # 200 MB there
    assert 190 < peak < 210


# run in a process started with the allocation counter preloaded: hypothesis draws runs of allocations and
# frees through torch, NumPy and featgraph's huge-page mappings, and each measured peak must equal the peak of
# the live bytes, reckoned from the sizes alone
COUNTED_RUNS = """
import numpy as np
import torch
from hypothesis import given, settings, strategies as st

from featgraph.backends.cpu import buffers
from featgraph.bench.measure import peaks_extra_mb

MIB = 1024**2


def mapped_bytes(kind, nbytes):
    if kind == "huge pages":  # the mapping huge_page_memory makes: whole huge pages and one more to align
        return -(-nbytes // buffers.HUGE_PAGE) * buffers.HUGE_PAGE + buffers.HUGE_PAGE
    return nbytes


def allocate(kind, nbytes):
    if kind == "torch":
        return torch.empty(nbytes, dtype=torch.uint8)
    if kind == "numpy":
        return np.empty(nbytes, dtype=np.uint8)
    return buffers.huge_page_memory(nbytes)


@settings(max_examples=30, deadline=None)
@given(st.lists(
    st.tuples(st.integers(1, 40), st.sampled_from(["torch", "numpy", "huge pages"]), st.booleans()),
    min_size=1, max_size=8,
))
def check(steps):
    live = now = expected = 0
    for mib, kind, kept in steps:
        now += mapped_bytes(kind, mib * MIB)
        expected = max(expected, now)
        if not kept:
            now -= mapped_bytes(kind, mib * MIB)

    def run():
        kept_arrays = []
        for mib, kind, kept in steps:
            array = allocate(kind, mib * MIB)
            if kept:
                kept_arrays.append(array)
            del array
        return kept_arrays

    peaks = peaks_extra_mb(run)
    assert abs(peaks.allocated_mb - expected / MIB) < 0.5, (steps, peaks, expected / MIB)


check()
print("counted")
"""


def test_a_counted_process_reports_the_peak_of_its_live_bytes_exactly():
    env = counting_allocations({**os.environ, "OMP_NUM_THREADS": "1"})
    done = subprocess.run([sys.executable, "-c", COUNTED_RUNS], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.strip().endswith("counted"), done.stderr[-3000:]


def test_an_uncounted_process_reports_no_allocated_peak():
    peaks = peaks_extra_mb(lambda: torch.ones(1_000_000))
    assert peaks.allocated_mb is None
    assert peaks.resident_mb is None or peaks.resident_mb >= 0


def test_counting_allocations_preloads_the_counter_before_what_the_environment_preloads():
    counted = counting_allocations({"LD_PRELOAD": "/elsewhere/libother.so", "KEPT": "1"})
    counter, other = counted["LD_PRELOAD"].split()
    assert counter.endswith(".so") and Path(counter).exists() and other == "/elsewhere/libother.so"
    assert counted["KEPT"] == "1"
    assert counting_allocations({})["LD_PRELOAD"] == counter
