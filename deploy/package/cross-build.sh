#!/usr/bin/env bash
# Cross-builds the arm64 agent for a Raspberry Pi (or the bridge for an arm64 backend host) on this x86_64 Debian 12
# machine, from Debian's own packages only (how and why: deploy/package/README.md):
#   deploy/package/cross-build.sh bookworm   # Raspberry Pi OS 12: glibc 2.36, libgpiod 1.6
#   deploy/package/cross-build.sh trixie     # Raspberry Pi OS 13: glibc 2.41, libgpiod 2.x
#   deploy/package/cross-build.sh bookworm parkwise-bridge   # the bridge (libpq), same sysroot
# The last line of output is the stripped aarch64 binary's path. Needs root (debootstrap, chroot).
# Work is cached in ~/.cache/parkwise-cross (PARKWISE_CROSS_CACHE): a trixie chroot with swiftlang
# 6.0.3, the suite's arm64 sysroot, a Swift SDK bundle and SwiftPM's build directory; a second run
# only syncs the sources and rebuilds what changed. PARKWISE_CROSS_REFRESH=1 fetches the packages anew.
set -euo pipefail
cd "$(dirname "$0")/../.."
src=$PWD
# shellcheck source=deploy/package/cross-env.sh
source deploy/package/cross-env.sh
suite=${1:-}
product=${2:-parkwise-agent}
cross_check_suite "$suite"
case $product in
    parkwise-agent | parkwise-bridge) ;;
    *) echo "usage: ${0##*/} bookworm|trixie [parkwise-agent|parkwise-bridge]" >&2; exit 64 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "cross-build: needs root (debootstrap, chroot): sudo $0 $suite" >&2; exit 1; }

started=$SECONDS
mkdir -p "$CROSS_CACHE/log" "$CROSS_CACHE/out/$suite"
log=$CROSS_CACHE/log/$suite.log
: >"$log"
# One cross build at a time per cache (CI and a release engineer may share a machine).
exec 9>"$CROSS_CACHE/lock"
flock 9

install_missing debootstrap rsync

in_chroot() { chroot_run "$CROSS_CHROOT" "$@"; }

# 1. The toolchain: trixie's swiftlang 6.0.3 needs glibc 2.38, the host has 2.36.
if [ ! -e "$CROSS_CHROOT/.parkwise-ready" ]; then
    rm -rf "$CROSS_CHROOT"
    quiet debootstrap --variant=minbase trixie "$CROSS_CHROOT" "$CROSS_MIRROR"
    quiet in_chroot apt-get update -q
    quiet in_chroot apt-get install -y -q --no-install-recommends swiftlang libc6-dev pkg-config
    touch "$CROSS_CHROOT/.parkwise-ready"
    timing "trixie chroot with swiftlang"
fi
px=$CROSS_CHROOT$CROSS_IN
mkdir -p "$px"

# A private apt state per suite that downloads arm64 packages without touching the host's apt.
apt_dir=$CROSS_CACHE/apt-$suite
apt_private() {
    apt-get -q -o Dir::State="$apt_dir/state" -o Dir::State::Lists="$apt_dir/lists" \
        -o Dir::State::status="$apt_dir/status" -o Dir::Cache="$apt_dir/cache" \
        -o Dir::Etc::sourcelist="$apt_dir/sources.list" -o Dir::Etc::sourceparts=- \
        -o APT::Architectures::=arm64 -o APT::Sandbox::User=root "$@"
}
# Downloads PACKAGE:arm64 (or an Architecture: all one, e.g. trixie's linux-libc-dev) into
# $apt_dir/debs unless already there; prints the .deb's path.
fetch() {
    local deb
    deb=$(find "$apt_dir/debs" -maxdepth 1 \( -name "${1}_*_arm64.deb" -o -name "${1}_*_all.deb" \) -print -quit)
    if [ -z "$deb" ]; then
        (cd "$apt_dir/debs" && { apt_private download "$1:arm64" >>"$log" 2>&1 || quiet apt_private download "$1:all"; })
        deb=$(find "$apt_dir/debs" -maxdepth 1 \( -name "${1}_*_arm64.deb" -o -name "${1}_*_all.deb" \) -print -quit)
    fi
    [ -n "$deb" ] || { echo "cross-build: $1:arm64 was not downloaded" >&2; exit 1; }
    echo "$deb"
}
if [ ! -e "$apt_dir/lists/.fresh" ] || [ -n "${PARKWISE_CROSS_REFRESH:-}" ]; then
    rm -rf "$apt_dir"
    mkdir -p "$apt_dir/state" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs"
    : >"$apt_dir/status"
    echo "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $CROSS_MIRROR $suite main" \
        >"$apt_dir/sources.list"
    quiet apt_private update
    touch "$apt_dir/lists/.fresh"
    rm -rf "$px/sysroot-$suite"
    if [ "$suite" = trixie ]; then rm -rf "$px/swift-arm64"; fi
    timing "arm64 package lists ($suite)"
fi

# 2. The arm64 sysroot: the suite's libraries and headers, as on the board.
# libpq and what it loads (Kerberos, LDAP, GnuTLS) for the bridge: linked, and run under qemu for its man page.
case "$suite" in
    bookworm) packages=(libgcc-12-dev libstdc++-12-dev libgpiod2 libssl3 libldap-2.5-0 libgnutls30 libunistring2
        libnettle8 libhogweed6) ;;
    trixie) packages=(libgcc-14-dev libstdc++-14-dev libgpiod3 libssl3t64 zlib1g libzstd1 libldap2 libgnutls30t64
        libunistring5 libnettle8t64 libhogweed6t64) ;;
esac
packages+=(libc6 libc6-dev linux-libc-dev libcrypt1 libcrypt-dev libgcc-s1 libstdc++6 libatomic1
    libgpiod-dev libmosquitto1 libmosquitto-dev libcjson1 libyaml-0-2 libyaml-dev
    libpq5 libpq-dev libssl-dev libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
    libsasl2-2 libidn2-0 libp11-kit0 libtasn1-6 libgmp10 libffi8)
sysroot=$px/sysroot-$suite
if [ "$(cat "$sysroot/.parkwise-ready" 2>/dev/null)" != "${packages[*]}" ]; then
    rm -rf "$sysroot"
    mkdir -p "$sysroot/.control"
    for p in "${packages[@]}"; do
        deb=$(fetch "$p")
        quiet dpkg-deb -x "$deb" "$sysroot"
        # The control files (shlibs) give the .deb's Depends for the libraries the agent links.
        quiet dpkg-deb -e "$deb" "$sysroot/.control/$p"
    done
    # usrmerge: /lib into /usr/lib, and absolute symlinks made relative to the sysroot.
    for d in lib lib64; do
        if [ -d "$sysroot/$d" ] && [ ! -L "$sysroot/$d" ]; then
            mkdir -p "$sysroot/usr/$d"
            cp -a "$sysroot/$d/." "$sysroot/usr/$d/"
            rm -rf "${sysroot:?}/$d"
            ln -s "usr/$d" "$sysroot/$d"
        fi
    done
    # trixie's packages are already merged: the linker scripts still name /lib.
    [ -e "$sysroot/lib" ] || ln -s usr/lib "$sysroot/lib"
    while IFS= read -r -d '' link; do
        target=$(readlink "$link")
        if [[ $target == /* ]]; then ln -snfr "$sysroot$target" "$link"; fi
    done < <(find "$sysroot" -type l -print0)
    echo "${packages[*]}" >"$sysroot/.parkwise-ready"
    timing "arm64 sysroot ($suite, ${#packages[@]} packages)"
fi

# 3. The aarch64 Swift runtime and resources, from the arm64 swiftlang of trixie (both suites).
resources=$px/swift-arm64
if [ ! -e "$resources/.parkwise-ready" ]; then
    apt_dir=$CROSS_CACHE/apt-trixie
    [ "$suite" = trixie ] || {
        # The trixie lists are needed only for this package: a second private state.
        if [ ! -e "$apt_dir/lists/.fresh" ]; then
            mkdir -p "$apt_dir/state" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs"
            : >"$apt_dir/status"
            echo "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $CROSS_MIRROR trixie main" \
                >"$apt_dir/sources.list"
            quiet apt_private update
            touch "$apt_dir/lists/.fresh"
        fi
    }
    deb=$(fetch swiftlang)
    rm -rf "$resources"
    mkdir -p "$resources"
    quiet tar -C "$resources" -xf <(dpkg-deb --fsys-tarfile "$deb") --wildcards \
        './usr/libexec/swift/lib/swift/*' './usr/libexec/swift/lib/swift_static/*' './usr/libexec/swift/lib/clang/*'
    apt_dir=$CROSS_CACHE/apt-$suite
    touch "$resources/.parkwise-ready"
    timing "aarch64 Swift resources (swiftlang:arm64)"
fi

# 4. The Swift SDK bundle. bookworm: Debian's arm64 Swift static libraries were built against glibc
# 2.41 and call C23 entry points and strlcpy that bookworm's 2.36 lacks; hidden forwarders in the
# executable resolve them.
sdk=$px/sdk-$suite
variant=$sdk/parkwise-$suite.artifactbundle/$suite
mkdir -p "$variant"
# Without it the driver warns on every compile job ("Could not read SDKSettings.json").
[ -e "$sysroot/SDKSettings.json" ] || cat >"$sysroot/SDKSettings.json" <<JSON
{ "DisplayName": "Debian $(cross_debian_release "$suite") ($suite) arm64", "Version": "$(cross_debian_release "$suite").0",
  "CanonicalName": "debian$(cross_debian_release "$suite")-arm64" }
JSON
linker_inputs=""
if [ "$suite" = bookworm ]; then
    cat >"$sdk/glibc236-compat.c" <<'C'
/* Forwarders for symbols of glibc >= 2.38 that Debian's arm64 Swift static libraries reference. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define HIDDEN __attribute__((visibility("hidden")))
HIDDEN long __isoc23_strtol(const char *s, char **end, int base) { return strtol(s, end, base); }
HIDDEN long long __isoc23_strtoll(const char *s, char **end, int base) { return strtoll(s, end, base); }
HIDDEN unsigned long __isoc23_strtoul(const char *s, char **end, int base) { return strtoul(s, end, base); }
HIDDEN unsigned long long __isoc23_strtoull(const char *s, char **end, int base) { return strtoull(s, end, base); }
HIDDEN int __isoc23_sscanf(const char *s, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    int n = vsscanf(s, format, ap);
    va_end(ap);
    return n;
}
HIDDEN size_t strlcpy(char *dst, const char *src, size_t size) {
    size_t len = strlen(src);
    if (size > 0) {
        size_t n = len < size - 1 ? len : size - 1;
        memcpy(dst, src, n);
        dst[n] = '\0';
    }
    return len;
}
HIDDEN size_t strlcat(char *dst, const char *src, size_t size) {
    size_t used = strnlen(dst, size);
    if (used == size) return size + strlen(src);
    return used + strlcpy(dst + used, src, size - used);
}
C
    if [ ! -e "$sdk/glibc236-compat.o" ] || [ "$sdk/glibc236-compat.c" -nt "$sdk/glibc236-compat.o" ]; then
        quiet in_chroot /usr/libexec/swift/bin/clang --target=aarch64-linux-gnu --sysroot="$CROSS_IN/sysroot-$suite" \
            -O2 -fPIC -c "$CROSS_IN/sdk-$suite/glibc236-compat.c" -o "$CROSS_IN/sdk-$suite/glibc236-compat.o"
    fi
    linker_inputs="\"$CROSS_IN/sdk-$suite/glibc236-compat.o\""
fi
cat >"$sdk/parkwise-$suite.artifactbundle/info.json" <<JSON
{
  "schemaVersion": "1.0",
  "artifacts": {
    "parkwise-$suite-aarch64": {
      "type": "swiftSDK",
      "version": "1",
      "variants": [{ "path": "$suite", "supportedTriples": ["x86_64-unknown-linux-gnu", "x86_64-pc-linux-gnu"] }]
    }
  }
}
JSON
cat >"$variant/swift-sdk.json" <<JSON
{
  "schemaVersion": "4.0",
  "targetTriples": {
    "aarch64-unknown-linux-gnu": {
      "sdkRootPath": "$CROSS_IN/sysroot-$suite",
      "swiftResourcesPath": "$CROSS_IN/swift-arm64/usr/libexec/swift/lib/swift",
      "swiftStaticResourcesPath": "$CROSS_IN/swift-arm64/usr/libexec/swift/lib/swift_static",
      "toolsetPaths": ["toolset.json"]
    }
  }
}
JSON
cat >"$variant/toolset.json" <<JSON
{
  "schemaVersion": "1.0",
  "rootPath": "/usr/libexec/swift/bin",
  "swiftCompiler": { "extraCLIOptions": ["-use-ld=lld"] },
  "linker": { "path": "/usr/libexec/swift/bin/ld.lld", "extraCLIOptions": [$linker_inputs] }
}
JSON

# 5. The build: the sources synced into the chroot (mtimes kept: SwiftPM rebuilds what changed).
mkdir -p "$px/src"
quiet rsync -a --delete --exclude=/.build --exclude=/.git --exclude=/.swiftpm --exclude=/.sim "$src/" "$px/src/"
out=$(cross_binary "$suite" "$product")
# The same sources (by content: a checkout of an older commit keeps older mtimes) as the binary already built from
# them: that binary, no build (ci-arm64.sh and make-deb.sh both ask for it, one after the other).
# (The sysroot's packages, by their control files, count too: a newer libgpiod or libc means a new link.)
sources=$( (cd "$px/src" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
            find "$(cross_sysroot "$suite")/.control" -name control -print0 | LC_ALL=C sort -z | xargs -0 cat) |
          sha256sum | cut -d' ' -f1)
if [ -f "$out" ] && [ "$(cat "$out.sources" 2>/dev/null)" = "$sources" ]; then
    printf 'cross-build: %s for %s unchanged since its last build, reused (%s)\n' "$product" "$suite" "$out" >&2
    echo "$out"
    exit 0
fi
pc=$CROSS_IN/sysroot-$suite
quiet in_chroot sh -c "cd $CROSS_IN/src && exec env \
    PKG_CONFIG_PATH=$pc/usr/lib/aarch64-linux-gnu/pkgconfig:$pc/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$pc \
    PARKWISE_LIBGPIOD=$(cross_libgpiod "$suite") \
    swift build -c release --product $product --static-swift-stdlib -Xlinker --strip-all -Xlinker -znow \
        --swift-sdks-path $CROSS_IN/sdk-$suite --swift-sdk parkwise-$suite-aarch64 \
        --scratch-path $CROSS_IN/build-$suite"
timing "swift build -c release (6.0.3, aarch64)"
bin=$px/build-$suite/aarch64-unknown-linux-gnu/release/$product
cp "$bin" "$out.new"
mv "$out.new" "$out"
echo "$sources" >"$out.sources"
printf 'cross-build: %s for %s in %d s (%s bytes); log %s\n' "$product" "$suite" \
    $((SECONDS - started)) "$(stat -c %s "$out")" "$log" >&2
echo "$out"
