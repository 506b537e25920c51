#!/usr/bin/env bash
# Checks what a user gets from pip: builds the abi3 wheel, installs it in a fresh virtual
# environment (numpy from PyPI, nothing from this checkout) and runs the command line from
# there on every adapter. Then builds the sdist, checks that it holds what compiling needs
# (scripts/check-sdist.sh), builds a wheel from it the way `pip install <sdist>` does — a
# cold compile in a private target dir, 2–4 minutes on 2 cores — and runs that one too.
#
# Environment: PYTHON (default python3) makes the fresh venvs; MATURIN (default
# .venv/bin/maturin) builds; CARGO_TARGET_DIR (default ~/.cache/amari-gpu-target) is reused
# for the wheel; SDIST_BUILD=0 skips building from the sdist (its contents are still checked).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

PYTHON=${PYTHON:-python3}
MATURIN=${MATURIN:-$root/.venv/bin/maturin}
SDIST_BUILD=${SDIST_BUILD:-1}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/amari-gpu-target}"

work=$(mktemp -d "${TMPDIR:-/tmp}/amari-gpu-wheel-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Mesa's loaders complain on stderr without a valid runtime dir; calibration figures go to a
# private cache so the test neither reads nor writes the user's.
mkdir -m 700 "$work/xdg"
export XDG_RUNTIME_DIR="$work/xdg"
export AMARI_GPU_CACHE_DIR="$work/cache"

step() { echo "wheel-test: $*"; }
fail() {
    echo "wheel-test: $*" >&2
    exit 1
}

# The one wheel in directory $1, checked to be abi3 and to carry the typing files (without
# them users' type checkers would see an untyped package).
only_wheel() {
    local wheels=("$1"/*.whl)
    [ "${#wheels[@]}" -eq 1 ] && [ -f "${wheels[0]}" ] || fail "expected one wheel in $1"
    case "$(basename "${wheels[0]}")" in
    *-cp39-abi3-*.whl) ;;
    *) fail "expected an abi3 wheel for Python >= 3.9, got $(basename "${wheels[0]}")" ;;
    esac
    "$PYTHON" - "${wheels[0]}" <<'EOF'
import sys
import zipfile

names = set(zipfile.ZipFile(sys.argv[1]).namelist())
# The command line lives in the tools subpackage; a wheel without it installs a dead script.
wanted = {"amari_gpu/__init__.py", "amari_gpu/py.typed", "amari_gpu/_native.pyi"}
wanted |= {"amari_gpu/tools/__init__.py", "amari_gpu/tools/cli.py"}
missing = sorted(wanted - names)
if not any(n.startswith("amari_gpu/_native.") and n.endswith((".so", ".pyd")) for n in names):
    missing.append("the native extension amari_gpu/_native.*")
if missing:
    sys.exit(f"wheel-test: {sys.argv[1]} lacks {', '.join(missing)}")
EOF
    echo "${wheels[0]}"
}

# Installs wheel $1 in a fresh venv at $2 and runs the command line from it, outside this
# checkout so that nothing here can be imported by accident.
try_wheel() {
    local wheel=$1 venv=$2
    SECONDS=0
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
    step "installed $(basename "$wheel") in a fresh venv in ${SECONDS}s"
    (
        cd "$work"
        "$venv/bin/python" - "$venv" <<'EOF'
import sys
from pathlib import Path

import amari_gpu

where = Path(amari_gpu.__file__).resolve()
if Path(sys.argv[1]).resolve() not in where.parents:
    sys.exit(f"wheel-test: amari_gpu imported from {where}, not from the fresh venv")
print(f"wheel-test: amari_gpu {amari_gpu.__version__} from {where.parent}")
EOF
        SECONDS=0
        "$venv/bin/python" -m amari_gpu info
        "$venv/bin/amari-gpu" demo --items 100000
        step "info and demo passed in ${SECONDS}s"
    )
}

# --locked: the lockfile shipped in the sdist must be the one the wheel is built with.
SECONDS=0
step "building the wheel (maturin build --release --locked)"
"$MATURIN" build --release --locked --quiet --out "$work/wheels"
wheel=$(only_wheel "$work/wheels")
step "built $(basename "$wheel") in ${SECONDS}s"
# From here on nothing may lean on the dev environment (the Makefile exports it).
unset VIRTUAL_ENV
try_wheel "$wheel" "$work/venv"

SECONDS=0
"$MATURIN" sdist --out "$work/sdist" >/dev/null
sdists=("$work"/sdist/*.tar.gz)
sdist=${sdists[0]}
bash scripts/check-sdist.sh "$sdist"
step "built and checked $(basename "$sdist") in ${SECONDS}s"

if [ "$SDIST_BUILD" = 0 ]; then
    step "SDIST_BUILD=0: not building a wheel from the sdist"
    exit 0
fi
# As `pip install <sdist>` on a user's machine: isolated build env (maturin from PyPI), no
# cached wheel, a target dir of its own (so nothing compiled from this checkout is reused),
# and the sdist's lockfile enforced. The first fresh venv's pip builds it: the interpreter
# given as PYTHON need not have pip of its own.
SECONDS=0
step "building a wheel from the sdist (cold compile)"
CARGO_TARGET_DIR="$work/sdist-target" MATURIN_PEP517_ARGS="--locked" \
    "$work/venv/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-cache-dir --no-deps \
    --wheel-dir "$work/sdist-wheels" "$sdist"
sdist_wheel=$(only_wheel "$work/sdist-wheels")
step "built $(basename "$sdist_wheel") from the sdist in ${SECONDS}s"
try_wheel "$sdist_wheel" "$work/sdist-venv"
