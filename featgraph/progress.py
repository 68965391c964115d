"""A dependency-free progress bar for long loops (training epochs, tuning searches)."""

from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    """``with Progress(total, "train") as bar: bar.update(status="loss 0.3")`` draws one line on stderr:
    redrawn in place on a terminal, every tenth of the way (and at the end) in logs; silent when not
    ``enabled``."""

    def __init__(
        self, total: int, label: str, stream: TextIO | None = None, width: int = 24, enabled: bool = True
    ) -> None:
        self.total, self.label, self.width, self.done, self.enabled = max(total, 1), label, width, 0, enabled
        self.stream = sys.stderr if stream is None else stream
        self.interactive = self.stream.isatty()
        self._last_tenth = -1

    def update(self, steps: int = 1, status: str = "") -> None:
        self.done = min(self.done + steps, self.total)
        if not self.enabled:
            return
        tenth = 10 * self.done // self.total
        if self.interactive:
            self.stream.write("\r" + self._line(status))
        elif tenth != self._last_tenth:
            self.stream.write(self._line(status) + "\n")
        self._last_tenth = tenth
        self.stream.flush()

    def _line(self, status: str) -> str:
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        return f"{self.label} [{bar}] {self.done}/{self.total} {status}".rstrip()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled and self.interactive:
            self.stream.write("\n")
            self.stream.flush()
