"""The README and the docs site stay true: every ```python block runs, and the site builds with --strict."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_hooks" not in p.parts)


def python_blocks(text: str) -> list[str]:
    """Every ```python block of a Markdown text, in order, dedented (blocks may sit inside list items)."""
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text, flags=re.S | re.M)
    return [textwrap.dedent("\n".join(line[len(indent) :] for line in code.splitlines())) for indent, code in blocks]


def run_blocks(path: Path) -> None:
    """Run a page's blocks in order in one namespace, as a reader would paste them."""
    namespace: dict = {"__name__": f"docs:{path.name}"}
    for code in python_blocks(path.read_text()):
        exec(compile(code, str(path), "exec"), namespace)  # noqa: S102


def test_python_blocks_are_found_inside_list_items():
    text = "- a list item:\n\n  ```python\n  x = 1\n  ```\n\n```python\ny = 2\n```\n"
    assert python_blocks(text) == ["x = 1", "y = 2"]


def test_readme_python_examples_run():
    assert python_blocks((ROOT / "README.md").read_text())
    run_blocks(ROOT / "README.md")


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p.read_text())], ids=lambda p: p.stem)
def test_docs_python_examples_run(page: Path):
    run_blocks(page)


def test_docs_site_builds_strict(tmp_path):
    """A broken link or anchor, an unresolved API reference or a missing docstring fails the build."""
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, build.stdout + build.stderr
    assert (tmp_path / "site" / "reference" / "te" / "index.html").exists()
