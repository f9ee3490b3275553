#!/usr/bin/env bash
# initramfs.sh CACHE AGENT OUT: the VM's initramfs (an uncompressed newc cpio: the kernel unpacks it faster
# than gzip under TCG) with busybox, libgpiod 1.6 tools, mosquitto, the modules, the agent binary, and
# every shared library these need, plus the loader. Fails if any library cannot be found.
# x86_64 (setup.sh's CACHE): libraries found with ldd, the guest packages first, then the host's. An agent built
# against libgpiod 2.x (libgpiod2.sh) finds its libgpiod.so.3 through its rpath; it lands in /lib/x86_64-linux-gnu
# next to the 1.6 tools' libgpiod.so.2.
# arm64 (setup.sh's CACHE/arm64, PARKWISE_VM_ARCH=arm64): libraries found by their DT_NEEDED names (readelf, no
# loader runs), first in AGENT_SYSROOT (the cross build's sysroot of the agent's suite: trixie's glibc 2.41 and
# libgpiod.so.3 for the trixie agent), then in the guest root's bookworm packages. The libc and the loader come
# from the same place, so the bookworm agent runs on bookworm's glibc 2.36 as on a board.
# More files (bench.sh's C agent, probe, strace, modules) as SRC=DEST arguments: an ELF program comes with its
# libraries, anything else is copied as it is.
set -euo pipefail
CACHE="$1"; AGENT="$2"; OUT="$3"
shift 3
HERE="$(cd "$(dirname "$0")" && pwd)"
die() { echo "vm-initramfs: FAILED: $*" >&2; exit 1; }
ARCH="${PARKWISE_VM_ARCH:-x86_64}"
case "$ARCH" in
    x86_64) TRIPLET=x86_64-linux-gnu; LOADER=/lib64/ld-linux-x86-64.so.2 ;;
    arm64) TRIPLET=aarch64-linux-gnu; LOADER=/lib/ld-linux-aarch64.so.1 ;;
    *) die "PARKWISE_VM_ARCH='$ARCH': expected x86_64 or arm64" ;;
esac

ROOT="$CACHE/root"
BB="$ROOT/bin/busybox"
HOST_BB="$BB"                                      # lists the applets and packs the cpio, on this host
[[ $ARCH == arm64 ]] && HOST_BB="$CACHE/host/bin/busybox"
STAGE="$(mktemp -d "${TMPDIR:-/tmp}/parkwise-vm-initramfs.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,lib/$TRIPLET,lib64,lib/modules,etc,proc,sys,dev,tmp,root,sim/configs,var/run}

cp "$BB" "$STAGE/bin/busybox"
for applet in $("$HOST_BB" --list); do
    [[ "$applet" == busybox ]] || ln -sf busybox "$STAGE/bin/$applet"
done

LIBPATH="$ROOT/usr/lib/x86_64-linux-gnu:$ROOT/lib/x86_64-linux-gnu"
# arm64: where a DT_NEEDED name is looked for, in this order.
LIBDIRS=()
for dir in "${AGENT_SYSROOT:-}" "$ROOT"; do
    [[ -n "$dir" ]] && LIBDIRS+=("$dir/usr/lib/$TRIPLET" "$dir/lib/$TRIPLET" "$dir/usr/lib" "$dir/lib")
done
# copy_needed FILE: FILE's DT_NEEDED libraries, and theirs, into /lib/aarch64-linux-gnu (each name once).
copy_needed() {
    local lib dir found
    for lib in $(readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        [[ -f "$STAGE/lib/$TRIPLET/$lib" ]] && continue
        found=""
        for dir in "${LIBDIRS[@]}"; do
            [[ -f "$dir/$lib" ]] && { found="$dir/$lib"; break; }
        done
        [[ -n "$found" ]] || die "library $lib of $1 not found in ${LIBDIRS[*]}"
        cp -L "$found" "$STAGE/lib/$TRIPLET/$lib"
        copy_needed "$found"
    done
}
copy_elf() {  # copy_elf FILE DEST: the program and its libraries (into /lib/<triplet>)
    cp "$1" "$STAGE$2"
    if [[ $ARCH == arm64 ]]; then copy_needed "$1"; return; fi
    local deps
    deps="$(LD_LIBRARY_PATH="$LIBPATH" ldd "$1")" || die "ldd $1 failed"
    if grep -q "not found" <<<"$deps"; then die "libraries of $1 not found: $(grep 'not found' <<<"$deps" | tr -s ' \t' ' ')"; fi
    while read -r lib; do
        [[ -f "$STAGE/lib/x86_64-linux-gnu/$(basename "$lib")" ]] || cp -L "$lib" "$STAGE/lib/x86_64-linux-gnu/"
    done < <(awk '/=> \// {print $3}' <<<"$deps")
}
for program in gpioinfo gpiodetect gpiomon gpioget gpioset mosquitto_sub mosquitto_pub; do
    copy_elf "$ROOT/usr/bin/$program" "/usr/bin/$program"
done
copy_elf "$ROOT/usr/sbin/mosquitto" /usr/sbin/mosquitto
copy_elf "$AGENT" /usr/local/bin/parkwise-agent
if [[ $ARCH == x86_64 ]]; then
    cp -L "$LOADER" "$STAGE/lib64/" || die "no dynamic loader $LOADER on the host"
    cp -L "$LOADER" "$STAGE/lib/$TRIPLET/"
else
    # The loader of the libc copied (the agent's sysroot's, if it has one), at the path every program names.
    loader=""
    for dir in "${LIBDIRS[@]}"; do [[ -f "$dir/${LOADER##*/}" ]] && { loader="$dir/${LOADER##*/}"; break; }; done
    [[ -n "$loader" ]] || die "no dynamic loader ${LOADER##*/} in ${LIBDIRS[*]}"
    cp -L "$loader" "$STAGE$LOADER"
    copy_elf "$ROOT/usr/bin/strace" /usr/bin/strace
fi
cp "$CACHE"/modules/*.ko "$STAGE/lib/modules/"

cp "$HERE/guest/init" "$STAGE/init"
cp "$HERE/guest/lib.sh" "$HERE/guest/serve.sh" "$HERE/guest/bench.sh" "$STAGE/sim/"
cp "$HERE"/guest/configs/*.yaml "$STAGE/sim/configs/"
chmod +x "$STAGE/init" "$STAGE/sim/bench.sh"
for extra in "$@"; do
    src="${extra%%=*}"; dest="${extra#*=}"
    mkdir -p "$STAGE$(dirname "$dest")"
    if [[ "$(head -c 4 "$src" | od -An -c | tr -d ' ')" == '177ELF' && "$src" != *.ko ]]; then copy_elf "$src" "$dest"
    else cp "$src" "$STAGE$dest" || die "cannot copy $src"; fi
done
echo 'root:x:0:0:root:/root:/bin/sh' > "$STAGE/etc/passwd"
echo 'root:x:0:' > "$STAGE/etc/group"
echo '127.0.0.1 localhost' > "$STAGE/etc/hosts"

(cd "$STAGE" && find . -mindepth 1 | "$HOST_BB" cpio -o -H newc 2>/dev/null) > "$OUT.tmp" || die "cpio failed"
mv "$OUT.tmp" "$OUT"
