"""The hand-written C++ shipped in ``cpp/``: the code generator's prelude, the neighbour sampler, the looped-format
builder, the counting sort that groups edges, the dropout pass and the roofline loops. Read as text and handed to
the compile cache like generated sources, so a library is keyed by exactly the text it was built from."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

CPP_DIR = files(__package__).joinpath("cpp")


@cache
def cpp_source(name: str) -> str:
    """The text of the hand-written file ``cpp/<name>``."""
    return CPP_DIR.joinpath(name).read_text(encoding="utf-8")


def cpp_files() -> list[str]:
    """The names of every hand-written C++ file, sorted."""
    return sorted(entry.name for entry in CPP_DIR.iterdir() if entry.name.endswith((".cpp", ".h")))
