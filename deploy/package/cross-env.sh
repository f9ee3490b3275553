# Sourced by cross-build.sh, make-deb.sh and ci-arm64.sh: where the arm64 cross build keeps its work
# (outside the clone, shared by every clone on the machine) and what differs between the two suites.
# shellcheck shell=bash
CROSS_CACHE=${PARKWISE_CROSS_CACHE:-$HOME/.cache/parkwise-cross}
CROSS_MIRROR=${PARKWISE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CROSS_CHROOT=$CROSS_CACHE/chroot-trixie        # trixie + swiftlang 6.0.3 (amd64): the toolchain
CROSS_IN=/px                                   # inside the chroot: sysroots, SDK bundles, sources, builds

cross_check_suite() {
    case "$1" in
        bookworm | trixie) ;;
        *) echo "usage: ${0##*/} bookworm|trixie  (Raspberry Pi OS 12 with libgpiod 1.6, or 13 with libgpiod 2.x)" >&2; exit 64 ;;
    esac
}
cross_sysroot() { echo "$CROSS_CHROOT$CROSS_IN/sysroot-$1"; }   # as seen from the host (qemu -L)
cross_binary() { echo "$CROSS_CACHE/out/$1/parkwise-agent"; }
cross_libgpiod() { [ "$1" = bookworm ] && echo 1 || echo 2; }
cross_debian_release() { [ "$1" = bookworm ] && echo 12 || echo 13; }

# Runs a command in the chroot DIR with /proc and /dev mounted in a private mount namespace: the
# mounts vanish with the command, nothing stays mounted if it is interrupted.
chroot_run() {
    unshare --mount --propagation private -- sh -c '
        mount -t proc proc "$0/proc" && mount --rbind /dev "$0/dev" &&
        exec chroot "$0" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root \
            DEBIAN_FRONTEND=noninteractive "$@"' "$@"
}
