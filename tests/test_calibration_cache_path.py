"""Whatever sits at the calibration cache's path, a context never hangs on it nor fails.

A FIFO there used to block the first call forever in ``open()`` (with Ctrl-C ignored).
Anything that is not a readable regular file of sane size (a FIFO, a directory, a dangling
symlink, a file of gigabytes, text that is not a cache) is now passed over with a WARNING
naming the path and what is wrong, and the figures are measured again. Each case runs in a
fresh interpreter with a timeout, so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from _process import python

CACHE_FILE = "calibration-v2.json"

CALL = """
import logging
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
import numpy as np, amari_gpu
# Two devices and chunks of 16 rows: the call is split, so its plan measures (and caches).
ctx = amari_gpu.MultiGpuContext(backends=["vulkan"], devices_per_adapter=2, chunk_items=16)
a = np.ones((64, 8), np.float32)
assert np.isfinite(ctx.geometric_product(a, a)).all()
print("ok")
"""

# Far longer than a calibration on a busy 2-core machine takes, far shorter than "forever".
TIMEOUT_S = 300


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return "is not a regular file (a FIFO)"


def _directory(path: Path) -> str:
    path.mkdir()
    (path / "inside").write_text("{}")
    return "is not a regular file (a directory)"


def _dangling(path: Path) -> str:
    path.symlink_to(path.parent / "nowhere.json")
    return "cannot be opened"


def _huge(path: Path) -> str:
    with path.open("wb") as f:
        f.truncate(1 << 30)  # sparse: a gigabyte of zeros that takes no disk
    return "is 1073741824 bytes, more than the 4194304 a cache file can be"


def _garbage(path: Path) -> str:
    path.write_bytes(b"\x00\xffnot json")
    return "is not a calibration cache"


@pytest.mark.parametrize(
    ("make", "regular_after"),
    [(_fifo, True), (_directory, False), (_dangling, True), (_huge, True), (_garbage, True)],
    ids=["fifo", "directory", "dangling-symlink", "huge", "garbage"],
)
def test_anything_but_a_cache_file_is_a_warning_never_a_hang(
    tmp_path: Path, make: Callable[[Path], str], regular_after: bool
) -> None:
    path = tmp_path / CACHE_FILE
    problem = make(path)
    env = dict(os.environ, AMARI_GPU_CACHE_DIR=str(tmp_path))
    done = python("-c", CALL, env=env, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok"), done.stdout
    warnings = [w for w in done.stderr.splitlines() if w.startswith("WARNING amari_gpu.")]
    read = f"WARNING amari_gpu.calibration.cache: calibration cache {path} {problem}"
    assert any(w.startswith(read) and w.endswith("measuring again without it") for w in warnings), (
        read,
        warnings,
    )
    # The same problem is reported once, not once per read of the file.
    assert sum(w.startswith(read) for w in warnings) == 1, warnings
    if regular_after:
        # The fresh figures replaced it (a symlink is replaced, not followed).
        assert path.is_file() and not path.is_symlink()
        assert json.loads(path.read_text())["entries"]
    else:
        # A directory cannot be replaced: the cache is skipped, which is said too.
        assert path.is_dir()
        assert any("calibration cache not written" in w for w in warnings), warnings
