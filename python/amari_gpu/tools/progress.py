"""A tiny dependency-free progress bar on stderr for the command line.

Animated (redrawn in place) only when the stream is a terminal; otherwise it writes a few
plain lines (start, each quarter, end) so logs of CI runs stay short. ``enabled=False``
(``--json``) makes it silent, so machine-readable stdout is never mixed with progress.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO

_WIDTH = 28
_REDRAW_S = 0.1  # redraws per second are capped: a terminal is slower than a tight loop


class Progress:
    """``with Progress(total, "label") as bar: ... bar.advance(note="...")``.

    ``total=None`` makes an indeterminate bar (a spinner with the elapsed time) for one long
    call that reports no steps, e.g. a calibration; it is redrawn from a background thread,
    which works because the native calls release the GIL.
    """

    def __init__(
        self,
        total: int | None,
        label: str,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
    ) -> None:
        self.total = total
        self.label = label
        self.done = 0
        self.note = ""
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = enabled
        self._tty = enabled and bool(getattr(self._stream, "isatty", lambda: False)())
        self._start = time.perf_counter()
        self._last_draw = 0.0
        self._quarter = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._spinner: threading.Thread | None = None

    def __enter__(self) -> Progress:
        self._start = time.perf_counter()
        if self._tty:
            self._draw(force=True)
            if self.total is None:
                self._spinner = threading.Thread(target=self._spin, daemon=True)
                self._spinner.start()
        elif self._enabled:
            steps = "" if self.total is None else f" ({self.total} steps)"
            self._write(f"{self.label}{steps} ...\n")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._spinner is not None:
            self._spinner.join()
        elapsed = time.perf_counter() - self._start
        outcome = "failed" if exc_type is not None else "done"
        if self._tty:
            self._draw(force=True)
            self._write("\n")
        elif self._enabled:
            self._write(f"{self.label}: {outcome} in {elapsed:.1f} s\n")

    def advance(self, steps: int = 1, note: str = "") -> None:
        """Counts ``steps`` more steps done; ``note`` says what is running now."""
        with self._lock:
            self.done += steps
            self.note = note
        if self._tty:
            self._draw()
        elif self._enabled and self.total:
            quarter = min(4, 4 * self.done // self.total)
            if 0 < quarter < 4 and quarter > self._quarter:
                self._quarter = quarter
                self._write(f"{self.label}: {quarter * 25}% ({self.done}/{self.total})\n")

    def _spin(self) -> None:
        while not self._stop.wait(0.2):
            self._draw(force=True)

    def _draw(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self._last_draw < _REDRAW_S:
            return
        self._last_draw = now
        elapsed = now - self._start
        with self._lock:
            if self.total is None:
                frame = "|/-\\"[int(elapsed * 5) % 4]
                line = f"{self.label} {frame} {elapsed:5.1f} s"
            else:
                filled = _WIDTH * min(self.done, self.total) // max(self.total, 1)
                bar = "#" * filled + "." * (_WIDTH - filled)
                line = f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f} s"
            if self.note:
                line += f"  {self.note}"
        # Clear the rest of the line: the previous note may have been longer.
        self._write("\r" + line[:160] + "\x1b[K")

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()
