#!/usr/bin/env bash
# Makes sure wgpu will find adapters: a Vulkan loader with at least one driver (ICD) and an
# EGL implementation for the GL backend. On Debian/Ubuntu without them (a machine with no
# GPU, or a bare container) it installs Mesa's software rasterisers: lavapipe (Vulkan) and
# llvmpipe (GL). Machines that already have drivers are left alone.
set -euo pipefail

# The linker cache is read whole before matching: with pipefail, `ldconfig -p | grep -q`
# fails at random when grep exits on its first match and ldconfig, still writing, gets
# SIGPIPE (seen on a machine whose cache listing passed 40 KB).
linker_has() {
    local cache
    cache="$(ldconfig -p 2>/dev/null)" || return 1
    grep -q "$1" <<<"$cache"
}

have_vulkan() {
    linker_has 'libvulkan\.so\.1' || return 1
    compgen -G '/usr/share/vulkan/icd.d/*.json' >/dev/null ||
        compgen -G '/etc/vulkan/icd.d/*.json' >/dev/null ||
        compgen -G '/usr/local/share/vulkan/icd.d/*.json' >/dev/null
}

have_egl() {
    linker_has 'libEGL\.so\.1' &&
        compgen -G '/usr/share/glvnd/egl_vendor.d/*.json' >/dev/null
}

case "$(uname -s)" in
Linux) ;;
*)
    echo "ensure-adapter: $(uname -s) uses the system's Metal/DX12/Vulkan drivers; nothing to install"
    exit 0
    ;;
esac

if have_vulkan && have_egl; then
    exit 0
fi

if ! command -v apt-get >/dev/null; then
    echo "ensure-adapter: no Vulkan driver or EGL found and no apt-get here." >&2
    echo "Install your GPU's Vulkan driver, or Mesa's lavapipe (package usually named" >&2
    echo "mesa-vulkan-drivers or vulkan-swrast) and Mesa's EGL." >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
echo "ensure-adapter: installing Mesa's software adapters (lavapipe, llvmpipe)"
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    mesa-vulkan-drivers libvulkan1 libegl1 libegl-mesa0 libgl1-mesa-dri >/dev/null
have_vulkan || { echo "ensure-adapter: Vulkan still not usable after installing Mesa" >&2; exit 1; }
