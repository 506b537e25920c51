"""Running Python in a fresh interpreter, as a user would: for the command line, README's
examples and what importing the package does to a process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping


def python(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """``python args...`` with the given environment (default: this one), output captured."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=dict(os.environ if env is None else env),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
