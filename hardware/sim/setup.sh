#!/usr/bin/env bash
# One-time (cached) preparation of the gpio-sim test VM, everything from Debian bookworm packages:
#   - the kernel (linux-image-amd64's or linux-image-arm64's current version), as qemu boots it directly: amd64's
#     bzImage unpacked to an ELF vmlinux (PVH), arm64's vmlinuz as it is (an uncompressed arm64 Image);
#   - configfs.ko from that kernel (arm64: also virtio_mmio.ko and virtio_console.ko, the command port's hvc0),
#     irq_sim.ko and gpio-sim.ko built out of tree against its headers from linux-source-6.1 of the same version
#     (the Debian kernel has no gpio-sim); arm64's with Debian's cross compiler (gcc-aarch64-linux-gnu);
#   - busybox-static, gpiod (libgpiod 1.6 tools), mosquitto and its clients, unpacked into a guest root (arm64: with
#     every library they need, libc6 and its loader included, and strace, all arm64 packages).
# PARKWISE_VM_ARCH: x86_64 (default) or arm64. The arm64 packages come through a private apt state (its lists in
# CACHE/arm64/apt, refreshed once a day) that never touches the host's apt sources or dpkg.
# Result (printed as the last line): the directory holding the kernel (vmlinux or Image), modules/*.ko, root/ and
# kernel-release: CACHE itself for x86_64, CACHE/arm64 for arm64.
# Cache: $PARKWISE_VM_CACHE or ~/.cache/parkwise-vm. A second run only checks the stamp file.
# Fails (non-zero, with the reason) on any missing tool, download or build failure.
set -euo pipefail

CACHE="${PARKWISE_VM_CACHE:-$HOME/.cache/parkwise-vm}"
ARCH="${PARKWISE_VM_ARCH:-x86_64}"
log() { echo "vm-setup: $*" >&2; }
die() { echo "vm-setup: FAILED: $*" >&2; exit 1; }
case "$ARCH" in
    x86_64) DEBARCH=amd64; TOOLS=(gcc); MAKE_ARGS=() ;;
    arm64) DEBARCH=arm64; CACHE="$CACHE/arm64"; TOOLS=(aarch64-linux-gnu-gcc)
           MAKE_ARGS=(ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-) ;;
    *) die "PARKWISE_VM_ARCH='$ARCH': expected x86_64 or arm64" ;;
esac
mkdir -p "$CACHE"

for tool in apt-get apt-cache dpkg-deb xz make gcc "${TOOLS[@]}"; do
    command -v "$tool" >/dev/null || die "'$tool' is not installed (needs a Debian/Ubuntu host with build-essential$(
        [[ $ARCH == arm64 ]] && echo ' and gcc-aarch64-linux-gnu'))"
done

# apt_vm apt-get|apt-cache ARGS: the host's apt for x86_64; for arm64 a private state of bookworm's lists (main,
# updates, security), like deploy/package/cross-build.sh's: arm64 native, amd64 only for linux-kbuild (its programs
# run on this host).
APT_DIR="$CACHE/apt"
apt_vm() {
    local tool=$1; shift
    if [[ $ARCH == x86_64 ]]; then "$tool" "$@"; return; fi
    "$tool" -q -o Dir::State="$APT_DIR/state" -o Dir::State::Lists="$APT_DIR/lists" \
        -o Dir::State::status="$APT_DIR/status" -o Dir::Cache="$APT_DIR/cache" \
        -o Dir::Etc::sourcelist="$APT_DIR/sources.list" -o Dir::Etc::sourceparts=- \
        -o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o APT::Architectures::=amd64 \
        -o APT::Sandbox::User=root "$@"
}
if [[ $ARCH == arm64 && ( ! -f "$APT_DIR/lists/.fresh" || -n "$(find "$APT_DIR/lists/.fresh" -mmin +1440)" ) ]]; then
    log "arm64 package lists (bookworm, bookworm-updates, bookworm-security)"
    rm -rf "$APT_DIR"
    mkdir -p "$APT_DIR/state" "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
    : > "$APT_DIR/status"
    mirror="${PARKWISE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
    for suite in "$mirror bookworm" "$mirror bookworm-updates" "${mirror%/debian}/debian-security bookworm-security"; do
        echo "deb [arch=arm64,amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $suite main"
    done > "$APT_DIR/sources.list"
    apt_vm apt-get update > "$CACHE/apt-update.log" 2>&1 \
        || die "apt-get update of the arm64 lists failed: $(tail -n 3 "$CACHE/apt-update.log")"
    touch "$APT_DIR/lists/.fresh"
fi

# The kernel package version: pinned by PARKWISE_VM_KERNEL (e.g. 6.1.192-3) or the candidate of linux-image-<arch>.
KVER_DEB="${PARKWISE_VM_KERNEL:-$(apt_vm apt-cache policy "linux-image-$DEBARCH" | awk '/Candidate:/ {print $2}')}"
[[ -n "$KVER_DEB" && "$KVER_DEB" != "(none)" ]] \
    || die "apt knows no linux-image-$DEBARCH (run apt-get update; bookworm or bookworm-security must be in the sources)"
# (Nothing is piped into head or a quiet grep here: under pipefail the producer's SIGPIPE would fail the script at random.)
IMAGE_PKG="$(apt_vm apt-cache show "linux-image-$DEBARCH=$KVER_DEB" \
    | awk '!found && /^Depends: linux-image-/ { sub(/^Depends: /, ""); sub(/[ ,].*/, ""); print; found = 1 }')"
[[ -n "$IMAGE_PKG" ]] || die "cannot tell which kernel linux-image-$DEBARCH=$KVER_DEB depends on"
KREL="${IMAGE_PKG#linux-image-}"              # 6.1.0-57-amd64
KABI="${KREL%-"$DEBARCH"}"                    # 6.1.0-57
KSERIES="$(echo "$KREL" | cut -d. -f1-2)"      # 6.1

# Every package with its exact version: the kernel's pinned to KVER_DEB, the guest programs' the candidates apt
# offers now. The cache is keyed by these versions, so a point release or a security update is downloaded and
# built afresh instead of an older cached .deb being picked by name.
# arm64: linux-kbuild is amd64's (fixdep, modpost…: programs that run on this host).
KBUILD_PKG="linux-kbuild-$KSERIES"
[[ $ARCH == arm64 ]] && KBUILD_PKG+=":amd64"
kernel_pkgs=("$IMAGE_PKG" "linux-headers-$KREL" "linux-headers-$KABI-common" "$KBUILD_PKG" "linux-source-$KSERIES")
# Guest programs and the libraries they need that a minimal Debian host may not have (the rest, libc6, libssl3…,
# are taken from the host, which is the same Debian release; arm64 takes every one from Debian's arm64 packages).
guest_pkgs=(busybox-static gpiod libgpiod2 mosquitto mosquitto-clients libmosquitto1 libcjson1 libdlt2 libwrap0)
[[ $ARCH == arm64 ]] && guest_pkgs+=(libc6 libssl3 libgcc-s1 libstdc++6 libsystemd0 libcap2 libgcrypt20 libgpg-error0
    liblz4-1 liblzma5 libzstd1 zlib1g libnsl2 libtirpc3 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libcom-err2
    libkrb5support0 libkeyutils1 strace libdw1 libelf1 libunwind8 libbz2-1.0)
# Programs initramfs.sh runs on this host: arm64's busybox cannot list its applets or pack the cpio here, amd64's can.
host_pkgs=()
[[ $ARCH == arm64 ]] && host_pkgs=(busybox-static:amd64)
declare -A VERSION=()
for pkg in "${kernel_pkgs[@]}"; do VERSION[$pkg]="$KVER_DEB"; done
# One apt-cache call for all of them (one a package costs a second each).
while read -r pkg version; do VERSION[$pkg]="$version"; done \
    < <(apt_vm apt-cache policy "${guest_pkgs[@]}" "${host_pkgs[@]}" \
        | awk '/^[^ ]/ {sub(/:$/, ""); p = $1} /Candidate:/ {print p, $2}')
for pkg in "${guest_pkgs[@]}" "${host_pkgs[@]}"; do
    [[ -n "${VERSION[$pkg]:-}" && "${VERSION[$pkg]}" != "(none)" ]] || die "apt knows no candidate for $pkg (run apt-get update)"
done
KEY="$(for pkg in "${kernel_pkgs[@]}" "${guest_pkgs[@]}" "${host_pkgs[@]}"; do echo "$pkg=${VERSION[$pkg]}"; done | sha256sum | cut -c1-16)"
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
# deb NAME[:ARCH]: the cached .deb of NAME at VERSION[NAME[:ARCH]] (apt-get download names it NAME_VERSION_ARCH.deb,
# ':' as %3a), of ARCH (default the VM's) or all.
deb() {
    local name="${1%%:*}" arch="${1#*:}" file
    [[ "$arch" == "$1" ]] && arch="$DEBARCH"
    for file in "$DEBS/${name}_${VERSION[$1]//:/%3a}_"{"$arch",all}.deb; do
        [[ -f "$file" ]] && { echo "$file"; return 0; }
    done
    return 1
}
for pkg in "${kernel_pkgs[@]}" "${guest_pkgs[@]}" "${host_pkgs[@]}"; do
    deb "$pkg" >/dev/null && continue
    log "download $pkg=${VERSION[$pkg]}"
    (cd "$DEBS" && apt_vm apt-get download -q "$pkg=${VERSION[$pkg]}") >/dev/null 2>"$CACHE/download.err" \
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
rm -rf "$CACHE/host.tmp"
mkdir -p "$CACHE/host.tmp"
for pkg in "${host_pkgs[@]}"; do
    dpkg-deb -x "$(deb "$pkg")" "$CACHE/host.tmp" || die "cannot unpack $pkg"
done

# --- kernel: what qemu boots (KERNEL_FILE); configfs.ko (arm64: and the virtio console's modules) -----------------
rm -rf "$CACHE/kernel.tmp"
mkdir -p "$CACHE/kernel.tmp"
dpkg-deb -x "$(deb "$IMAGE_PKG")" "$CACHE/kernel.tmp" || die "cannot unpack the kernel"
VMLINUZ="$CACHE/kernel.tmp/boot/vmlinuz-$KREL"
[[ -f "$VMLINUZ" ]] || die "the kernel package has no /boot/vmlinuz-$KREL"
u8()  { od -An -tu1 -j "$2" -N1 "$1" | tr -d ' '; }
u32() { od -An -tu4 -j "$2" -N4 "$1" | tr -d ' '; }
if [[ $ARCH == x86_64 ]]; then
    KERNEL_FILE=vmlinux
    # bzImage: setup sectors at 0x1f1, payload offset/length (from the protected-mode start) at 0x248/0x24c.
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
    kernel_modules=(fs/configfs/configfs)
else
    KERNEL_FILE=Image
    # Debian's arm64 vmlinuz is the uncompressed Image (qemu -kernel boots it as it is): its header's magic
    # "ARM\x64" at offset 56. A gzip-compressed one (an Image.gz) is unpacked, which also saves qemu doing it.
    if [[ "$(head -c 2 "$VMLINUZ" | od -An -tx1 | tr -d ' ')" == 1f8b ]]; then
        gzip -dc "$VMLINUZ" > "$CACHE/vmlinux.tmp" || die "cannot gunzip $VMLINUZ"
    else
        cp "$VMLINUZ" "$CACHE/vmlinux.tmp"
    fi
    [[ "$(u32 "$CACHE/vmlinux.tmp" 56)" == $((0x644d5241)) ]] \
        || die "$VMLINUZ is no arm64 Image (no 'ARM\\x64' magic at offset 56, nor once gunzipped)"
    # The host's command port is a virtio console (hvc0) on the virt machine's virtio-mmio bus: both modules here.
    kernel_modules=(fs/configfs/configfs drivers/virtio/virtio_mmio drivers/char/virtio_console)
fi
mkdir -p "$CACHE/modules.tmp"
for module in "${kernel_modules[@]}"; do
    name="${module##*/}"
    file="$(find "$CACHE/kernel.tmp/lib/modules/$KREL/kernel/$(dirname "$module")" -name "$name.ko*" -print -quit)"
    [[ -n "$file" ]] || die "the kernel package has no $name module"
    case "$file" in
        *.xz) xz -dc "$file" > "$CACHE/modules.tmp/$name.ko" ;;
        *.zst) die "zstd-compressed modules are not handled" ;;
        *) cp "$file" "$CACHE/modules.tmp/$name.ko" ;;
    esac
done

# --- gpio-sim and irq_sim, out of tree ------------------------------------------------------------------------------
HDR="$CACHE/headers"
rm -rf "$HDR"
mkdir -p "$HDR"
for pkg in "linux-headers-$KREL" "linux-headers-$KABI-common" "$KBUILD_PKG"; do
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
make -C "$KDIR" M="$CACHE/build" "${MAKE_ARGS[@]}" -j"$(nproc)" modules > "$CACHE/build/make.log" 2>&1 \
    || die "module build failed: $(tail -n 20 "$CACHE/build/make.log")"
cp "$CACHE/build/irq_sim.ko" "$CACHE/build/gpio-sim.ko" "$CACHE/modules.tmp/"

# --- publish ---------------------------------------------------------------------------------------------------------
rm -rf "$CACHE/root" "$CACHE/modules" "$CACHE/host"
mv "$CACHE/root.tmp" "$CACHE/root"
mv "$CACHE/host.tmp" "$CACHE/host"
mv "$CACHE/modules.tmp" "$CACHE/modules"
mv "$CACHE/vmlinux.tmp" "$CACHE/$KERNEL_FILE"
rm -rf "$CACHE/kernel.tmp"
echo "$KREL" > "$CACHE/kernel-release"
rm -f "$CACHE"/ready-*
touch "$STAMP"
log "ready: $CACHE"
echo "$CACHE"
