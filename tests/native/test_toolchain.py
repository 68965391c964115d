"""What the machine offers: thread counts from the environment, validated before OpenMP sees them."""

from __future__ import annotations

import warnings

import pytest
import torch

from featgraph.native import toolchain


@pytest.mark.parametrize(("value", "threads"), [("3", 3), (" 2 ", 2), ("3,2", 3)])
def test_omp_num_threads_sets_the_kernels_threads(monkeypatch, value, threads):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert toolchain.num_threads() == threads


@pytest.mark.parametrize("value", ["-1", "0", "lots", "99999999999"])
def test_an_omp_num_threads_that_is_no_thread_count_is_reported_and_ignored(monkeypatch, value):
    """libgomp ignores such a value with a warning of its own; passed on as a count, it would abort."""
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    with pytest.warns(UserWarning, match=f"OMP_NUM_THREADS='{value}' is not a thread count from 1 to 4096"):
        assert toolchain.num_threads() == torch.get_num_threads()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reported once per value, not at every kernel launch
        assert toolchain.num_threads() == torch.get_num_threads()


def test_unset_omp_num_threads_follows_torch(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert toolchain.num_threads() == torch.get_num_threads()


@pytest.mark.parametrize("value", [0, -1, toolchain.MAX_THREADS + 1, 1.0, "2", True, None])
def test_checked_threads_names_the_setting(value):
    with pytest.raises(ValueError, match=f"my_threads must be an integer from 1 to 4096, got {value!r}"):
        toolchain.checked_threads(value, "my_threads")
    assert toolchain.checked_threads(toolchain.MAX_THREADS, "my_threads") == toolchain.MAX_THREADS


def test_cpu_signature_reads_the_first_processors_model_and_flags(tmp_path):
    info = tmp_path / "cpuinfo"
    first = "processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu avx512f avx512_bf16\n"
    info.write_text(first + "\nprocessor\t: 1\nmodel name\t: Other CPU\nflags\t\t: fpu\n")
    assert toolchain.cpu_signature.__wrapped__(str(info)) == "Some CPU fpu avx512f avx512_bf16"
    assert toolchain.cpu_signature.__wrapped__(str(tmp_path / "missing")) == ""


def test_the_kernel_cache_key_names_the_cpu(monkeypatch):
    """A library built for one CPU's instructions is never the one another CPU's process loads."""
    from featgraph.native import compiler

    source = 'extern "C" int f() { return 1; }'
    here = compiler.library_path(source)
    monkeypatch.setattr(compiler, "cpu_signature", lambda: "Another CPU fpu sse2")
    assert compiler.library_path(source) != here
