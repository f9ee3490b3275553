#!/usr/bin/env bash
# system-root.sh CACHE DEB...: the system test's Debian bookworm root as a raw ext4 disk image (cached), for booting
# with systemd as PID 1 under setup.sh's kernel (CACHE: setup.sh's directory). Made with debootstrap from Debian's mirror:
#   installed:   systemd (PID 1), udev, kmod, mosquitto and its clients, busybox (usleep for guest/lib.sh), procps,
#                postgresql (Debian's 15, its cluster 15/main: the backend's database for the bridge);
#   downloaded:  the Depends of each DEB (the agent's, the bridge's) and gpiod (apt-get --download-only: in
#                /var/cache/apt/archives with the apt lists, so `apt install ./DEB` in the guest resolves them with no
#                network, as an installer's apt would);
#   the kernel:  setup.sh's linux-image unpacked (its modules for udev and modprobe), gpio-sim.ko and irq_sim.ko in
#                /lib/modules/<release>/updates, depmod run.
# Nothing of the harness is in the image: guest/system/init copies it in at every boot (so a harness change needs no
# new image). Cached in CACHE/system-<key>/root.img, the key made of every package's exact version (the candidates of
# the host's apt, which has the same Debian sources), the kernel's and this script's text: a point release, a security
# update or a changed Depends builds a new image. The image's own package list: CACHE/system-<key>/packages.
# Prints the image's path as the last line. Fails (non-zero, with the reason) on any missing tool or failed step.
# PARKWISE_DEBIAN_MIRROR (default http://deb.debian.org/debian) and PARKWISE_DEBIAN_SECURITY_MIRROR
# (http://deb.debian.org/debian-security): where debootstrap and the root's apt fetch (the host's own sources).
set -euo pipefail
CACHE="$1"; DEBS=("${@:2}")
HERE="$(cd "$(dirname "$0")" && pwd)"
log() { echo "system-root: $*" >&2; }
die() { echo "system-root: FAILED: $*" >&2; exit 1; }
# shellcheck source=deploy/package/cross-env.sh
source "$HERE/../../deploy/package/cross-env.sh"   # chroot_run, CROSS_MIRROR
SECURITY_MIRROR=${PARKWISE_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
for tool in debootstrap mkfs.ext4 dpkg-deb apt-cache unshare; do
    command -v "$tool" >/dev/null || die "'$tool' is not installed"
done
KREL="$(cat "$CACHE/kernel-release")"
image_deb="$(find "$CACHE/debs" -name "linux-image-${KREL}_*.deb" -print -quit)"
[[ -n "$image_deb" ]] || die "no cached linux-image-$KREL .deb in $CACHE/debs (run setup.sh)"

(( ${#DEBS[@]} )) || die "usage: system-root.sh CACHE DEB..."
installed=(systemd systemd-sysv udev kmod mosquitto mosquitto-clients busybox procps e2fsprogs postgresql postgresql-15)
# The packages' Depends by name (the first of alternatives, versions dropped): what apt must find in the root.
depends=""
for deb in "${DEBS[@]}"; do
    depends+="$(dpkg-deb -f "$deb" Depends)," || die "cannot read the Depends of $deb"
done
mapfile -t downloaded < <(tr ',' '\n' <<<"$depends" | sed 's/|.*//; s/(.*//; s/[[:space:]]//g' | grep -v '^$' | sort -u)
downloaded+=(gpiod)
declare -A VERSION=()
# One apt-cache call for all of them (one a package costs a second each).
while read -r pkg version; do VERSION[$pkg]="$version"; done \
    < <(apt-cache policy "${installed[@]}" "${downloaded[@]}" | awk '/^[^ ]/ {sub(/:$/, ""); p = $1} /Candidate:/ {print p, $2}')
for pkg in "${installed[@]}" "${downloaded[@]}"; do
    [[ -n "${VERSION[$pkg]:-}" && "${VERSION[$pkg]}" != "(none)" ]] || die "apt knows no candidate for $pkg (run apt-get update)"
done
KEY="$( { for pkg in "${installed[@]}" "${downloaded[@]}"; do echo "$pkg=${VERSION[$pkg]}"; done
          basename "$image_deb"; cat "$CACHE/modules/gpio-sim.ko" "$0"; } | sha256sum | cut -c1-16)"
DIR="$CACHE/system-$KEY"
if [[ -f "$DIR/root.img" ]]; then
    log "cached: $DIR/root.img"
    echo "$DIR/root.img"
    exit 0
fi
log "debootstrap bookworm (systemd, mosquitto; ${downloaded[*]} downloaded only) into $DIR"
rm -rf "$DIR.tmp"
mkdir -p "$DIR.tmp"
root="$DIR.tmp/root"
steplog="$DIR.tmp/step.log"
step() {  # step DESCRIPTION COMMAND...: the command's output in the step log, shown on failure
    "${@:2}" >"$steplog" 2>&1 || die "$1: $(tail -n 25 "$steplog")"
}
incl="$(IFS=,; echo "${installed[*]}")"
step "debootstrap" debootstrap --variant=minbase --include="$incl" bookworm "$root" "$CROSS_MIRROR"
cat >"$root/etc/apt/sources.list" <<SOURCES
deb $CROSS_MIRROR bookworm main
deb $CROSS_MIRROR bookworm-updates main
deb $SECURITY_MIRROR bookworm-security main
SOURCES
step "apt-get update in the root" chroot_run "$root" apt-get update -q
step "apt-get dist-upgrade in the root" chroot_run "$root" apt-get -y -q dist-upgrade
step "apt-get --download-only ${downloaded[*]}" \
    chroot_run "$root" apt-get -y -q --no-install-recommends --download-only install "${downloaded[@]}"

# The kernel's modules (udev, modprobe), with gpio-sim and irq_sim, which Debian's kernel lacks.
dpkg-deb --fsys-tarfile "$image_deb" | tar -x -C "$root" ./lib/modules ./boot || die "cannot unpack $image_deb"
mkdir -p "$root/lib/modules/$KREL/updates"
cp "$CACHE/modules/gpio-sim.ko" "$CACHE/modules/irq_sim.ko" "$root/lib/modules/$KREL/updates/"
step "depmod" chroot_run "$root" depmod -a "$KREL"

# The board's basics: root file system, name, no login prompts or timers that would run into the cases.
echo '/dev/vda / ext4 errors=remount-ro 0 1' >"$root/etc/fstab"
echo parkwise-systest >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 parkwise-systest\n' >"$root/etc/hosts"
step "machine id" chroot_run "$root" systemd-machine-id-setup   # no first-boot presets
for unit in getty@.service serial-getty@.service getty-static.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
            e2scrub_reap.service fstrim.timer; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
grep -qw usleep <<<"$(chroot_run "$root" busybox --list)" || die "Debian's busybox has no usleep"
ln -sf /bin/busybox "$root/usr/local/bin/usleep"
chroot_run "$root" dpkg-query -W >"$DIR.tmp/packages"
rm -rf "$root/var/lib/apt/lists/partial" "$root/var/cache/apt/"*.bin

log "ext4 image ($(du -sm "$root" | cut -f1) MB of files)"
step "mkfs.ext4 -d" mkfs.ext4 -q -F -L parkwise-root -d "$root" "$DIR.tmp/root.img" 2G
rm -rf "$root"
rm -rf "$DIR"
mv "$DIR.tmp" "$DIR"
# Older images (other versions) go: each is about 2 GB of sparse file.
find "$CACHE" -maxdepth 1 -name 'system-*' ! -name "system-$KEY" -exec rm -rf {} +
log "ready: $DIR/root.img"
echo "$DIR/root.img"
