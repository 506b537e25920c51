#!/usr/bin/env bash
# Checks that an sdist (the .tar.gz `maturin sdist` makes) holds what building a wheel from
# it needs: the workspace manifest and lockfile, the cargo configuration (its loop
# alignment), both crates' manifests, the Python package with its typing files, and every
# file the Rust sources pull in with include_str!/
# include_bytes! — the WGSL shaders live outside the crates, where `cargo package` does not
# look, so they are easy to lose.
set -euo pipefail
cd "$(dirname "$0")/.."

sdist=${1:?usage: scripts/check-sdist.sh path/to/amari_gpu-VERSION.tar.gz}
listing=$(tar -tzf "$sdist")
top=$(head -n1 <<<"$listing" | cut -d/ -f1)

needed=(
    Cargo.toml Cargo.lock pyproject.toml README.md .cargo/config.toml
    rust/amari-gpu/Cargo.toml rust/amari-gpu-py/Cargo.toml
    python/amari_gpu/__init__.py python/amari_gpu/py.typed python/amari_gpu/_native.pyi
)
# Every include_str!/include_bytes! target, as a path from the repository root. Paths in
# these macros are relative to the file that contains them.
while IFS=: read -r file target; do
    needed+=("$(realpath -m --relative-to=. "$(dirname "$file")/$target")")
done < <(grep -rEo 'include_(str|bytes)!\("[^"]+"\)' rust --include='*.rs' |
    sed -E 's/include_(str|bytes)!\("([^"]+)"\)/\2/')

missing=()
for path in "${needed[@]}"; do
    grep -qxF "$top/$path" <<<"$listing" || missing+=("$path")
done
if [ "${#missing[@]}" -ne 0 ]; then
    echo "check-sdist: $(basename "$sdist") lacks: ${missing[*]}" >&2
    exit 1
fi
# The workspace manifest must be the real one: the crates inherit version, edition and
# dependencies from it.
# (Read whole, then matched: under pipefail a `tar | grep -q` pipe can fail on SIGPIPE.)
manifest="$(tar -xzOf "$sdist" "$top/Cargo.toml")"
grep -qx '\[workspace\]' <<<"$manifest" || {
    echo "check-sdist: $top/Cargo.toml is not the workspace manifest" >&2
    exit 1
}
echo "check-sdist: $(basename "$sdist") holds the ${#needed[@]} files a build needs"
