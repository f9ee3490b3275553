#!/usr/bin/env bash
# initramfs.sh CACHE AGENT OUT: the VM's initramfs (an uncompressed newc cpio: the kernel unpacks it faster
# than gzip under TCG) with busybox, libgpiod 1.6 tools, mosquitto, the three modules, the agent binary, and
# every shared library these need (found with ldd: the guest packages first, then the host's), plus the
# loader. Fails if any library cannot be found. An agent built against libgpiod 2.x (libgpiod2.sh) finds its
# libgpiod.so.3 through its rpath; it lands in /lib/x86_64-linux-gnu next to the 1.6 tools' libgpiod.so.2.
# More files (bench.sh's C agent, probe, strace, modules) as SRC=DEST arguments: an ELF program comes with its
# libraries, anything else is copied as it is.
set -euo pipefail
CACHE="$1"; AGENT="$2"; OUT="$3"
shift 3
HERE="$(cd "$(dirname "$0")" && pwd)"
die() { echo "vm-initramfs: FAILED: $*" >&2; exit 1; }

ROOT="$CACHE/root"
BB="$ROOT/bin/busybox"
STAGE="$(mktemp -d "${TMPDIR:-/tmp}/parkwise-vm-initramfs.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,lib/x86_64-linux-gnu,lib64,lib/modules,etc,proc,sys,dev,tmp,root,sim/configs,var/run}

cp "$BB" "$STAGE/bin/busybox"
for applet in $("$BB" --list); do
    [[ "$applet" == busybox ]] || ln -sf busybox "$STAGE/bin/$applet"
done

LIBPATH="$ROOT/usr/lib/x86_64-linux-gnu:$ROOT/lib/x86_64-linux-gnu"
copy_elf() {  # copy_elf FILE DEST: the program and its libraries (into /lib/x86_64-linux-gnu)
    cp "$1" "$STAGE$2"
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
cp -L /lib64/ld-linux-x86-64.so.2 "$STAGE/lib64/" || die "no dynamic loader /lib64/ld-linux-x86-64.so.2 on the host"
cp -L /lib64/ld-linux-x86-64.so.2 "$STAGE/lib/x86_64-linux-gnu/"
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

(cd "$STAGE" && find . -mindepth 1 | "$BB" cpio -o -H newc 2>/dev/null) > "$OUT.tmp" || die "cpio failed"
mv "$OUT.tmp" "$OUT"
