#!/usr/bin/env bash
# One-time (cached) preparation of the gpio-sim test VM, everything from Debian bookworm packages:
#   - the kernel (linux-image-amd64's current version), unpacked to an ELF vmlinux qemu boots directly (PVH);
#   - configfs.ko from that kernel, irq_sim.ko and gpio-sim.ko built out of tree against its headers from
#     linux-source-6.1 of the same version (the Debian kernel has no gpio-sim);
#   - busybox-static, gpiod (libgpiod 1.6 tools), mosquitto and its clients, unpacked into a guest root.
# Result (printed as the last line): the cache directory, holding vmlinux, modules/*.ko and root/.
# Cache: $PARKWISE_VM_CACHE or ~/.cache/parkwise-vm. A second run only checks the stamp file.
# Fails (non-zero, with the reason) on any missing tool, download or build failure.
set -euo pipefail

CACHE="${PARKWISE_VM_CACHE:-$HOME/.cache/parkwise-vm}"
mkdir -p "$CACHE"
log() { echo "vm-setup: $*" >&2; }
die() { echo "vm-setup: FAILED: $*" >&2; exit 1; }

for tool in apt-get apt-cache dpkg-deb xz make gcc; do
    command -v "$tool" >/dev/null || die "'$tool' is not installed (needs a Debian/Ubuntu host with build-essential)"
done

# The kernel package version: pinned by PARKWISE_VM_KERNEL (e.g. 6.1.192-3) or the candidate of linux-image-amd64.
KVER_DEB="${PARKWISE_VM_KERNEL:-$(apt-cache policy linux-image-amd64 | awk '/Candidate:/ {print $2}')}"
[[ -n "$KVER_DEB" && "$KVER_DEB" != "(none)" ]] \
    || die "apt knows no linux-image-amd64 (run apt-get update; bookworm or bookworm-security must be in the sources)"
# (Nothing is piped into head or a quiet grep here: under pipefail the producer's SIGPIPE would fail the script at random.)
IMAGE_PKG="$(apt-cache show "linux-image-amd64=$KVER_DEB" \
    | awk '!found && /^Depends: linux-image-/ { sub(/^Depends: /, ""); sub(/[ ,].*/, ""); print; found = 1 }')"
[[ -n "$IMAGE_PKG" ]] || die "cannot tell which kernel linux-image-amd64=$KVER_DEB depends on"
KREL="${IMAGE_PKG#linux-image-}"              # 6.1.0-57-amd64
KABI="${KREL%-amd64}"                          # 6.1.0-57
KSERIES="$(echo "$KREL" | cut -d. -f1-2)"      # 6.1

# Every package with its exact version: the kernel's pinned to KVER_DEB, the guest programs' the candidates apt
# offers now. The cache is keyed by these versions, so a point release or a security update is downloaded and
# built afresh instead of an older cached .deb being picked by name.
kernel_pkgs=("$IMAGE_PKG" "linux-headers-$KREL" "linux-headers-$KABI-common" "linux-kbuild-$KSERIES" "linux-source-$KSERIES")
# Guest programs and the libraries they need that a minimal Debian host may not have (the rest, libc6, libssl3…,
# are taken from the host, which is the same Debian release).
guest_pkgs=(busybox-static gpiod libgpiod2 mosquitto mosquitto-clients libmosquitto1 libcjson1 libdlt2 libwrap0)
declare -A VERSION=()
for pkg in "${kernel_pkgs[@]}"; do VERSION[$pkg]="$KVER_DEB"; done
# One apt-cache call for all of them (one a package costs a second each).
while read -r pkg version; do VERSION[$pkg]="$version"; done \
    < <(apt-cache policy "${guest_pkgs[@]}" | awk '/^[^ ]/ {sub(/:$/, ""); p = $1} /Candidate:/ {print p, $2}')
for pkg in "${guest_pkgs[@]}"; do
    [[ -n "${VERSION[$pkg]:-}" && "${VERSION[$pkg]}" != "(none)" ]] || die "apt knows no candidate for $pkg (run apt-get update)"
done
KEY="$(for pkg in "${kernel_pkgs[@]}" "${guest_pkgs[@]}"; do echo "$pkg=${VERSION[$pkg]}"; done | sha256sum | cut -c1-16)"
STAMP="$CACHE/ready-$KREL-$KVER_DEB-$KEY-v2"
if [[ -f "$STAMP" ]]; then
    log "cached: kernel $KREL ($KVER_DEB) in $CACHE"
    echo "$CACHE"
    exit 0
fi
log "preparing kernel $KREL ($KVER_DEB), gpio-sim modules and guest tools in $CACHE"

# --- downloads (apt-get download: no root filesystem changes) -------------------------------------------------
DEBS="$CACHE/debs"
mkdir -p "$DEBS"
# deb NAME: the cached .deb of NAME at VERSION[NAME] (apt-get download names it NAME_VERSION_ARCH.deb, ':' as %3a).
deb() {
    local file
    for file in "$DEBS/${1}_${VERSION[$1]//:/%3a}_"*.deb; do [[ -f "$file" ]] && { echo "$file"; return 0; }; done
    return 1
}
for pkg in "${kernel_pkgs[@]}" "${guest_pkgs[@]}"; do
    deb "$pkg" >/dev/null && continue
    log "download $pkg=${VERSION[$pkg]}"
    (cd "$DEBS" && apt-get download -q "$pkg=${VERSION[$pkg]}") >/dev/null 2>"$CACHE/download.err" \
        || die "apt-get download $pkg=${VERSION[$pkg]} failed: $(tail -n 3 "$CACHE/download.err")"
    deb "$pkg" >/dev/null || die "apt-get download $pkg=${VERSION[$pkg]} saved no ${pkg}_${VERSION[$pkg]}_*.deb in $DEBS"
done

# --- guest root: programs and libraries ---------------------------------------------------------------------------
rm -rf "$CACHE/root.tmp"
mkdir -p "$CACHE/root.tmp"
for pkg in "${guest_pkgs[@]}"; do
    dpkg-deb -x "$(deb "$pkg")" "$CACHE/root.tmp" || die "cannot unpack $pkg"
done
[[ -x "$CACHE/root.tmp/bin/busybox" ]] || die "busybox-static has no /bin/busybox"

# --- kernel: vmlinuz -> ELF vmlinux; configfs.ko ------------------------------------------------------------------
rm -rf "$CACHE/kernel.tmp"
mkdir -p "$CACHE/kernel.tmp"
dpkg-deb -x "$(deb "$IMAGE_PKG")" "$CACHE/kernel.tmp" || die "cannot unpack the kernel"
VMLINUZ="$CACHE/kernel.tmp/boot/vmlinuz-$KREL"
[[ -f "$VMLINUZ" ]] || die "the kernel package has no /boot/vmlinuz-$KREL"
# bzImage: setup sectors at 0x1f1, payload offset/length (from the protected-mode start) at 0x248/0x24c.
u8()  { od -An -tu1 -j "$2" -N1 "$1" | tr -d ' '; }
u32() { od -An -tu4 -j "$2" -N4 "$1" | tr -d ' '; }
setup_sects="$(u8 "$VMLINUZ" $((0x1f1)))"; [[ "$setup_sects" == 0 ]] && setup_sects=4
payload_offset="$(u32 "$VMLINUZ" $((0x248)))"
payload_length="$(u32 "$VMLINUZ" $((0x24c)))"
start=$(( (setup_sects + 1) * 512 + payload_offset ))
dd if="$VMLINUZ" of="$CACHE/payload.xz" iflag=skip_bytes,count_bytes skip="$start" count="$payload_length" bs=1M status=none \
    || die "cannot read the payload of $VMLINUZ"
xz -dcq --single-stream < "$CACHE/payload.xz" > "$CACHE/vmlinux.tmp" 2>/dev/null || true
rm -f "$CACHE/payload.xz"
[[ "$(head -c 4 "$CACHE/vmlinux.tmp" | od -An -c | tr -d ' ')" == '177ELF' ]] \
    || die "could not unpack the XZ payload of $VMLINUZ into an ELF vmlinux (not an XZ-compressed bzImage?)"
mkdir -p "$CACHE/modules.tmp"
configfs="$(find "$CACHE/kernel.tmp/lib/modules/$KREL" -name 'configfs.ko*' -print -quit)"
[[ -n "$configfs" ]] || die "the kernel package has no configfs module"
case "$configfs" in
    *.xz) xz -dc "$configfs" > "$CACHE/modules.tmp/configfs.ko" ;;
    *.zst) die "zstd-compressed modules are not handled" ;;
    *) cp "$configfs" "$CACHE/modules.tmp/configfs.ko" ;;
esac

# --- gpio-sim and irq_sim, out of tree ------------------------------------------------------------------------------
HDR="$CACHE/headers"
rm -rf "$HDR"
mkdir -p "$HDR"
for pkg in "linux-headers-$KREL" "linux-headers-$KABI-common" "linux-kbuild-$KSERIES"; do
    dpkg-deb -x "$(deb "$pkg")" "$HDR" || die "cannot unpack $pkg"
done
KDIR="$HDR/usr/src/linux-headers-$KREL"
[[ -f "$KDIR/Makefile" ]] || die "no $KDIR/Makefile in the headers package"
# The headers' Makefiles and links point at /usr/src and /usr/lib: point them into the unpacked tree.
grep -rl --include=Makefile "/usr/src/linux-headers-" "$KDIR" | while read -r file; do
    sed -i "s#/usr/src/linux-headers-#$HDR/usr/src/linux-headers-#g" "$file"
done
find "$HDR/usr/src" -type l | while read -r link; do
    target="$(readlink "$link")"
    if [[ "$target" == /usr/* ]]; then ln -sfn "$HDR$target" "$link"; fi
done

SRC_DEB="$(deb "linux-source-$KSERIES")"
rm -rf "$CACHE/src.tmp" "$CACHE/build"
mkdir -p "$CACHE/src.tmp" "$CACHE/build"
log "unpack gpio-sim.c, gpiolib.h and irq_sim.c from linux-source-$KSERIES"
dpkg-deb --fsys-tarfile "$SRC_DEB" | tar -x -C "$CACHE/src.tmp" --wildcards '*/linux-source-*.tar.xz' \
    || die "linux-source package has no source tarball"
tarball="$(find "$CACHE/src.tmp" -name 'linux-source-*.tar.xz' -print -quit)"
top="$(basename "$tarball" .tar.xz)"
tar -xJf "$tarball" -C "$CACHE/src.tmp" "$top/drivers/gpio/gpio-sim.c" "$top/drivers/gpio/gpiolib.h" "$top/kernel/irq/irq_sim.c" \
    || die "the kernel source lacks gpio-sim.c / gpiolib.h / irq_sim.c"
cp "$CACHE/src.tmp/$top/drivers/gpio/gpio-sim.c" "$CACHE/src.tmp/$top/drivers/gpio/gpiolib.h" \
   "$CACHE/src.tmp/$top/kernel/irq/irq_sim.c" "$CACHE/build/"
rm -rf "$CACHE/src.tmp"
# irq_to_desc() is not exported to modules in 6.1; the module also needs a license.
grep -q 'handle_simple_irq(irq_to_desc(irqnum));' "$CACHE/build/irq_sim.c" \
    || die "irq_sim.c changed: the irq_to_desc patch does not apply"
sed -i 's/handle_simple_irq(irq_to_desc(irqnum));/generic_handle_irq(irqnum);/' "$CACHE/build/irq_sim.c"
echo 'MODULE_LICENSE("GPL");' >> "$CACHE/build/irq_sim.c"
echo 'obj-m += irq_sim.o gpio-sim.o' > "$CACHE/build/Kbuild"
log "build irq_sim.ko and gpio-sim.ko against $KREL"
make -C "$KDIR" M="$CACHE/build" -j"$(nproc)" modules > "$CACHE/build/make.log" 2>&1 \
    || die "module build failed: $(tail -n 20 "$CACHE/build/make.log")"
cp "$CACHE/build/irq_sim.ko" "$CACHE/build/gpio-sim.ko" "$CACHE/modules.tmp/"

# --- publish ---------------------------------------------------------------------------------------------------------
rm -rf "$CACHE/root" "$CACHE/modules"
mv "$CACHE/root.tmp" "$CACHE/root"
mv "$CACHE/modules.tmp" "$CACHE/modules"
mv "$CACHE/vmlinux.tmp" "$CACHE/vmlinux"
rm -rf "$CACHE/kernel.tmp"
echo "$KREL" > "$CACHE/kernel-release"
rm -f "$CACHE"/ready-*
touch "$STAMP"
log "ready: $CACHE"
echo "$CACHE"
