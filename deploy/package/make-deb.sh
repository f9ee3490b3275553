#!/usr/bin/env bash
# Builds parkwise-agent_<version>+deb<N>_<arch>.deb (deploy/package/README.md):
#   deploy/package/make-deb.sh                    # this machine's architecture and Debian release
#   deploy/package/make-deb.sh arm64 bookworm     # Raspberry Pi OS 12 (cross build, needs root)
#   deploy/package/make-deb.sh arm64 trixie       # Raspberry Pi OS 13 (cross build, needs root)
# PARKWISE_DEB_OUT=DIR puts the .deb there (default .build/deb). The binary has the Swift runtime
# linked in statically: nothing of the toolchain is needed on the board.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=deploy/package/cross-env.sh
source deploy/package/cross-env.sh
out=${PARKWISE_DEB_OUT:-.build/deb}
mkdir -p "$out" .build
log=$PWD/.build/make-deb.log
: >"$log"

arch=${1:-$(dpkg --print-architecture)}
if [ "$arch" = "$(dpkg --print-architecture)" ]; then
    suite=${2:-$(. /etc/os-release && echo "$VERSION_CODENAME")}
    bash deploy/dev/setup.sh
    install_missing binutils python3
    quiet swift build -c release --static-swift-stdlib -Xlinker -znow --product parkwise-agent
    binary=.build/release/parkwise-agent
    agent=("$binary")
    # The host's own packages' symbols/shlibs files.
    control_files=(/var/lib/dpkg/info/*.symbols /var/lib/dpkg/info/*.shlibs)
elif [ "$arch" = arm64 ]; then
    suite=${2:-}
    cross_check_suite "$suite"
    install_missing qemu-user-static binutils python3
    binary=$(bash deploy/package/cross-build.sh "$suite")
    sysroot=$(cross_sysroot "$suite")
    agent=(qemu-aarch64-static -L "$sysroot" "$binary")
    control_files=("$sysroot"/.control/*/symbols "$sysroot"/.control/*/shlibs)
else
    echo "usage: $0 [arm64 bookworm|trixie]" >&2
    exit 64
fi
cross_check_suite "$suite"
release=$(cross_debian_release "$suite")
# bookworm keeps systemd and udev files in /lib, trixie (merged /usr) in /usr/lib.
libdir=lib
[ "$suite" = bookworm ] || libdir=usr/lib

upstream=$("${agent[@]}" version | awk '{print $2}')
version=$upstream+deb$release
changelog=deploy/package/changelog
top=$(sed -n '1s/^parkwise-agent (\([^)]*\)).*/\1/p' "$changelog")
[ "$top" = "$upstream" ] || {
    echo "make-deb: the agent is $upstream but $changelog starts with $top: add an entry" >&2
    exit 1
}
maintainer=$(sed -n 's/^ -- \(.*>\)  .*/\1/p;T;q' "$changelog")
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH=$(date -d "$(sed -n 's/^ -- .*>  //p;T;q' "$changelog")" +%s)

root=$(mktemp -d /tmp/parkwise-deb.XXXXXX)
trap 'rm -rf "$root"' EXIT
chmod 0755 "$root"
doc=$root/usr/share/doc/parkwise-agent
install -D -m 0755 "$binary" "$root/usr/bin/parkwise-agent"
if [ "$arch" = "$(dpkg --print-architecture)" ]; then strip --remove-section=.comment --remove-section=.note "$root/usr/bin/parkwise-agent"; fi  # cross: --strip-all
install -D -m 0644 deploy/systemd/parkwise-agent.service "$root/$libdir/systemd/system/parkwise-agent.service"
install -D -m 0644 deploy/package/60-parkwise-agent-gpio.rules "$root/$libdir/udev/rules.d/60-parkwise-agent-gpio.rules"
# The config the postinst puts in /etc/parkwise-agent/agent.yaml on the first install (never a conffile: every board
# edits it, so a changed example would stop unattended upgrades at a conffile prompt), with its device id left for the
# installer to set: an unedited config is refused (check-config and run exit 78), so two boards can never publish
# under the example's id and mix their events.
template=$root/usr/share/parkwise-agent/agent.yaml
install -d -m 0755 "$(dirname "$template")"
sed 's/^device: .*/device: ""   # set this board'"'"'s id, unique within the site (e.g. lot-b-gate)/' \
    hardware/examples/single-gate.yaml >"$template"
grep -q '^device: ""' "$template" || { echo "make-deb: the example has no device: line" >&2; exit 1; }
chmod 0644 "$template"
install -D -m 0644 README.md "$doc/README.md"
install -D -m 0644 hardware/TRACES.md "$doc/TRACES.md"
install -D -m 0644 deploy/backend/CONTRACT.md "$doc/CONTRACT.md"
install -D -m 0644 deploy/systemd/README.md "$doc/SYSTEMD.md"
install -D -m 0644 hardware/examples/campus.yaml "$doc/examples/campus.yaml"
install -D -m 0644 hardware/examples/single-gate.yaml "$doc/examples/single-gate.yaml"
sed "1s/^parkwise-agent ($upstream) [a-z]*;/parkwise-agent ($version) $suite;/" "$changelog" | gzip -9n >"$doc/changelog.gz"
install -D -m 0644 deploy/package/copyright "$doc/copyright"
mkdir -p "$root/usr/share/man/man1"
python3 deploy/package/help2man.py "$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)" -- "${agent[@]}" \
    | gzip -9n >"$root/usr/share/man/man1/parkwise-agent.1.gz"
chmod 0644 "$doc/changelog.gz" "$root/usr/share/man/man1/parkwise-agent.1.gz"

depends="adduser, $(python3 deploy/package/shlibdeps.py "$binary" "${control_files[@]}")"
mkdir -p "$root/DEBIAN"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
cat >"$root/DEBIAN/control" <<CONTROL
Package: parkwise-agent
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends
Section: net
Priority: optional
Description: ParkWise gate & sensor agent
 Reads a parking garage's lane loops and spot presence sensors through
 libgpiod and publishes occupancy, passages, check-ins and faults over MQTT
 with a durable outbox. Built for Debian $release / Raspberry Pi OS $suite.
CONTROL
for script in postinst prerm postrm; do
    install -m 0755 "deploy/package/$script" "$root/DEBIAN/$script"
done
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"
deb=$out/parkwise-agent_${version}_${arch}.deb
quiet dpkg-deb --root-owner-group -Zxz --build "$root" "$deb"
echo "make-deb: $deb ($(stat -c %s "$deb") bytes, binary $(stat -c %s "$root/usr/bin/parkwise-agent") bytes)" >&2
echo "$deb"
