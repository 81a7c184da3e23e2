"""A progress bar for long work (synthetic releases), shared by the CLI and the shell.

On a terminal it redraws one line; elsewhere (pipes, logs, tests) it prints the first update
and the last (100%) only, so that scripts still show what happened without a line per step.
"""

from __future__ import annotations

import shutil
import sys
from typing import IO


class ProgressBar:
    """A ``progress(fraction, message)`` callback that draws ``[#####-----]  50% message``."""

    def __init__(self, stream: IO[str] | None = None, width: int = 24):
        self.stream = stream or sys.stderr
        self.width = width
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = 0
        self._started = False

    def __call__(self, fraction: float, message: str) -> None:
        fraction = min(1.0, max(0.0, fraction))
        filled = int(round(fraction * self.width))
        line = f"[{'#' * filled}{'-' * (self.width - filled)}] {100 * fraction:3.0f}% {message}"
        if not self._tty:
            if not self._started or fraction >= 1.0:
                print(line, file=self.stream, flush=True)
            self._started = fraction < 1.0
            return
        columns = shutil.get_terminal_size((100, 24)).columns - 1
        line = line[:columns]
        self.stream.write("\r" + line.ljust(self._last))
        self._last = len(line)
        if fraction >= 1.0:
            self.stream.write("\n")
            self._last = 0
        self.stream.flush()
