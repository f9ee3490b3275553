# Sourced by cross-build.sh, make-deb.sh and ci-arm64.sh: where the arm64 cross build keeps its work
# (outside the clone, shared by every clone on the machine), what differs between the two suites,
# and the helpers the three share.
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
cross_binary() { echo "$CROSS_CACHE/out/$1/${2:-parkwise-agent}"; }   # SUITE [PRODUCT]
cross_libgpiod() { [ "$1" = bookworm ] && echo 1 || echo 2; }
cross_debian_release() { [ "$1" = bookworm ] && echo 12 || echo 13; }

# Runs a command in the chroot DIR with /proc and /dev mounted in a private mount namespace: the
# mounts vanish with the command, nothing stays mounted if it is interrupted.
chroot_run() {
    # shellcheck disable=SC2016  # (sh -c's own $0 and $@: the chroot and the command)
    unshare --mount --propagation private -- sh -c '
        mount -t proc proc "$0/proc" && mount --rbind /dev "$0/dev" &&
        exec chroot "$0" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root \
            DEBIAN_FRONTEND=noninteractive "$@"' "$@"
}

# Runs a step with its output appended to $log (the sourcing script's); on failure prints that step's output and stops.
# shellcheck disable=SC2154  # ($log: set by the script that sources this)
quiet() {
    local rc=0
    "$@" >"$log.step" 2>&1 || rc=$?
    cat "$log.step" >>"$log"
    if ((rc)); then cat "$log.step" >&2; echo "${0##*/}: failed ($rc): $*" >&2; exit 1; fi
}

# Installs the Debian packages given that are not installed yet (sudo when not root).
install_missing() {
    local missing=() p sudo=""
    for p in "$@"; do
        grep "ok installed" >/dev/null <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    quiet $sudo apt-get -o DPkg::Lock::Timeout=600 update -q
    quiet $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
}

# Prints how long the step that just ended took (since the last call, or since sourcing).
step_started=$SECONDS
timing() { printf '%s: %-48s %4d s\n' "${0##*/}" "$1" $((SECONDS - step_started)) >&2; step_started=$SECONDS; }

# debian_root ARCH SUITE: prints the path of the cached tar of a throwaway Debian root (debootstrap minbase with
# systemd, package lists fetched), made if missing: the one install-cycle.sh makes and uses (arm64 ones run under
# qemu-user, which install-cycle.sh registers).
debian_root() {
    local base=$CROSS_CACHE/$2-$1-systemd-root.tar dir
    if [ ! -e "$base" ]; then
        mkdir -p "$CROSS_CACHE"
        dir=$(mktemp -d /tmp/parkwise-root.XXXXXX)
        quiet debootstrap --arch="$1" --variant=minbase --include=systemd "$2" "$dir" "$CROSS_MIRROR"
        quiet chroot_run "$dir" apt-get update -q
        tar -C "$dir" -cf "$base.new.$$" . && mv "$base.new.$$" "$base"
        rm -rf "$dir"
    fi
    echo "$base"
}
