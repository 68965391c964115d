"""Every hand-written C++ file compiles without a warning (-Wall -Wextra -Werror beside the cache's flags), in
each translation unit featgraph builds from it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from featgraph.backends.cpu import sparse_rows
from featgraph.backends.cpu.codegen import PRELUDE
from featgraph.backends.cpu.dropout import CTYPES, FORMS, dropout_source
from featgraph.bench.roofline import gather_source
from featgraph.native.compiler import FLAGS, STANDARD_HEADERS
from featgraph.native.sources import cpp_files, cpp_source
from featgraph.native.toolchain import cxx_compiler

WARNINGS_AS_ERRORS = ("-Wall", "-Wextra", "-Werror")
HALF_AND_FLOAT = ("float32", "float16", "bfloat16")

# each hand-written file -> the sources featgraph builds from it
BUILDS: dict[str, Callable[[], list[str]]] = {
    "prelude.h": lambda: [f"typedef {ctype} T;\n{PRELUDE}" for ctype in ("float", "double")],
    "standard.h": lambda: [STANDARD_HEADERS.read_text()],
    "sampler.cpp": lambda: [cpp_source("sampler.cpp")],
    "with_loops.cpp": lambda: [cpp_source("with_loops.cpp")],
    "compress.cpp": lambda: [cpp_source("compress.cpp")],
    "segments.cpp": lambda: [cpp_source("segments.cpp")],
    "hilbert.cpp": lambda: [cpp_source("hilbert.cpp")],
    "allocations.cpp": lambda: [cpp_source("allocations.cpp")],
    "triad.cpp": lambda: [cpp_source("triad.cpp")],
    "gather.cpp": lambda: [gather_source(width, dtype) for width in (8, 24) for dtype in HALF_AND_FLOAT],
    "dropout.cpp": lambda: [dropout_source(dtype, form) for dtype in CTYPES for form in FORMS],
    "sparse_rows.cpp": lambda: [
        sparse_rows.sparse_rows_source(dtype, form) for dtype in sparse_rows.CTYPES for form in sparse_rows.FORMS
    ],
}


def test_every_hand_written_file_is_compiled_here():
    assert sorted(BUILDS) == cpp_files()


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_hand_written_cpp_compiles_without_warnings(name, tmp_path):
    for number, source in enumerate(BUILDS[name]()):
        path = tmp_path / f"unit{number}.cpp"
        path.write_text(source)
        command = [cxx_compiler(), *FLAGS, *WARNINGS_AS_ERRORS, path.name, "-o", f"unit{number}.so"]
        result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
        assert result.returncode == 0, f"{name} (unit {number}):\n{result.stderr[-4000:]}"
