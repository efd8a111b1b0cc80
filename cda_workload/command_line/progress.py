"""Progress of long work (data generation, model inference, reruns) on stderr: a rich status
line and timestamped log on a terminal, plain timestamped lines in logs and CI, so stdout
stays clean for results (``al lineage --json > out.json``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO


class Progress:
    """``say(msg)`` for steps; ``with progress.working(msg):`` for one long step."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self._console = None
        if self.stream.isatty():
            from rich.console import Console

            self._console = Console(file=self.stream, log_path=False)

    def say(self, msg: str) -> None:
        if self._console is not None:
            self._console.log(msg, markup=False, highlight=False)
        else:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=self.stream, flush=True)

    @contextmanager
    def working(self, msg: str) -> Iterator[None]:
        """A spinner with elapsed time on a terminal; start and end lines otherwise."""
        started = time.perf_counter()
        if self._console is not None:
            with self._console.status(msg):
                yield
        else:
            self.say(f"{msg} ...")
            yield
        self.say(f"{msg}: done in {time.perf_counter() - started:.1f} s")
