#!/usr/bin/env bash
# libgpiod 2.x for the VM tests (issue 5), and the agent built against it.
#   1. downloads PyPI's `gpiod` 2.x source distribution (it bundles the complete libgpiod 2 C library:
#      include/gpiod.h, lib/*.c, libgpiod-version.txt) with pip, no binaries;
#   2. compiles lib/*.c with gcc into libgpiod.so.3 (the soname of libgpiod 2.x, as in Debian 13's libgpiod3;
#      libgpiod 1.6 is libgpiod.so.2, so both can sit in the guest's /lib side by side) and installs it with
#      gpiod.h and a libgpiod.pc (Version 2.x) into $CACHE/libgpiod2;
#   3. builds the agent against it: PKG_CONFIG_PATH=<prefix>/lib/pkgconfig PARKWISE_LIBGPIOD=2 (Package.swift then
#      compiles Sources/GPIO/Gpiod2.swift), release, static Swift runtime, an rpath to <prefix>/lib so ldd (and
#      initramfs.sh) find the v2 library.
# Prints the agent binary's path as the last line (with --lib-only: the prefix). Fails loudly (non-zero) otherwise.
#
# PARKWISE_VM_CACHE         cache directory (default ~/.cache/parkwise-vm); a second run reuses the library
# PARKWISE_VM_BUILD_GPIOD2  swift scratch path of this build (default .build/vm-gpiod2 in the package; never the 1.6 one)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="${PARKWISE_VM_CACHE:-$HOME/.cache/parkwise-vm}"
PREFIX="$CACHE/libgpiod2"
SDISTS="$CACHE/pypi-gpiod"
LIB_ONLY=0
[[ "${1:-}" == "--lib-only" ]] && LIB_ONLY=1
log() { echo "libgpiod2: $*" >&2; }
die() { echo "libgpiod2: FAILED: $*" >&2; exit 1; }
mkdir -p "$CACHE" "$SDISTS"

# --- 1. the source distribution (cached: the network is used only when none is there) -----------------------------
sdist="$(find "$SDISTS" -maxdepth 1 -name 'gpiod-2.*.tar.gz' 2>/dev/null | sort -V | tail -n 1 || true)"
if [[ -z "$sdist" ]]; then
    command -v gcc >/dev/null || die "gcc is not installed (build-essential)"
    PIP=(python3 -m pip)
    "${PIP[@]}" --version >/dev/null 2>&1 || { command -v pip3 >/dev/null && PIP=(pip3); } \
        || die "pip is not installed (python3-pip)"
    log "download PyPI gpiod>=2,<3 (source distribution)"
    "${PIP[@]}" download -q --no-deps --no-binary :all: -d "$SDISTS" "gpiod>=2,<3" > "$SDISTS/pip.log" 2>&1 \
        || die "pip download gpiod failed: $(tail -n 5 "$SDISTS/pip.log")"
    sdist="$(find "$SDISTS" -maxdepth 1 -name 'gpiod-2.*.tar.gz' 2>/dev/null | sort -V | tail -n 1 || true)"
    [[ -n "$sdist" ]] || die "pip saved no gpiod-2.*.tar.gz in $SDISTS: $(ls "$SDISTS")"
fi
top="$(basename "$sdist" .tar.gz)"   # gpiod-2.5.0

# --- 2. libgpiod.so.3 into the prefix ------------------------------------------------------------------------------------
STAMP="$PREFIX/.ready-$top-v1"
if [[ ! -f "$STAMP" ]]; then
    SRC="$(mktemp -d "${TMPDIR:-/tmp}/parkwise-libgpiod2.XXXXXX")"
    trap 'rm -rf "$SRC"' EXIT
    tar -xzf "$sdist" -C "$SRC" || die "cannot unpack $sdist"
    S="$SRC/$top"
    for f in include/gpiod.h libgpiod-version.txt lib/chip.c lib/line-request.c lib/edge-event.c; do
        [[ -f "$S/$f" ]] || die "$top has no $f: it does not bundle the libgpiod C library (any more)"
    done
    version="$(tr -d ' \n\r' < "$S/libgpiod-version.txt")"
    [[ "$version" == 2.* ]] || die "$top bundles libgpiod '$version', not 2.x"
    log "compile libgpiod $version from $top"
    rm -rf "$PREFIX"
    mkdir -p "$PREFIX/include" "$PREFIX/lib/pkgconfig"
    gcc -O2 -g -shared -fPIC -fvisibility=hidden -D_GNU_SOURCE \
        -DGPIOD_API_VERSION_STR="\"$version\"" -DGPIOD_VERSION_STR="\"$version\"" \
        -I"$S/include" -I"$S/lib" "$S"/lib/*.c \
        -Wl,-soname,libgpiod.so.3 -o "$PREFIX/lib/libgpiod.so.3.$version" > "$SRC/gcc.log" 2>&1 \
        || die "gcc failed: $(tail -n 20 "$SRC/gcc.log")"
    ln -s "libgpiod.so.3.$version" "$PREFIX/lib/libgpiod.so.3"
    ln -s libgpiod.so.3 "$PREFIX/lib/libgpiod.so"
    cp "$S/include/gpiod.h" "$PREFIX/include/"
    cat > "$PREFIX/lib/pkgconfig/libgpiod.pc" <<PC
prefix=$PREFIX
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: libgpiod
Description: Library for interacting with Linux GPIO character devices (built from PyPI $top)
Version: $version
Libs: -L\${libdir} -lgpiod
Cflags: -I\${includedir}
PC
    grep -q ' gpiod_chip_request_lines$' <<<"$(nm -D --defined-only "$PREFIX/lib/libgpiod.so.3")" \
        || die "the library exports no gpiod_chip_request_lines (not libgpiod 2?)"
    touch "$STAMP"
fi
got="$(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --modversion libgpiod)" || die "pkg-config cannot read $PREFIX/lib/pkgconfig/libgpiod.pc"
[[ "$got" == 2.* ]] || die "pkg-config reports libgpiod $got from the prefix, not 2.x"
log "libgpiod $got in $PREFIX"
if [[ $LIB_ONLY -eq 1 ]]; then echo "$PREFIX"; exit 0; fi

# --- 3. the agent against it -------------------------------------------------------------------------------------------
BUILD="${PARKWISE_VM_BUILD_GPIOD2:-$REPO/.build/vm-gpiod2}"
log "building the agent against libgpiod $got (release, static Swift runtime) in $BUILD"
(cd "$REPO" && PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" PARKWISE_LIBGPIOD=2 \
    swift build -c release --static-swift-stdlib --scratch-path "$BUILD" --product parkwise-agent \
    -Xlinker -rpath -Xlinker "$PREFIX/lib") >&2 || die "the agent does not build against libgpiod 2"
AGENT="$BUILD/release/parkwise-agent"
[[ -x "$AGENT" ]] || die "no agent binary at $AGENT"
deps="$(ldd "$AGENT")" || die "ldd $AGENT failed"
grep -q "libgpiod.so.3 => $PREFIX/lib/libgpiod.so.3" <<<"$deps" \
    || die "$AGENT does not load $PREFIX/lib/libgpiod.so.3: $(grep gpiod <<<"$deps" || echo 'no libgpiod at all')"
! grep -q 'libgpiod.so.2' <<<"$deps" || die "$AGENT links libgpiod 1.6 (libgpiod.so.2) as well"
echo "$AGENT"
