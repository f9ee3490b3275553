#!/usr/bin/env bash
# Builds PACKAGE_<upstream>-<revision>+deb<N>_<arch>.deb, the agent's (default) or the bridge's (deploy/package/README.md):
#   deploy/package/make-deb.sh                                  # parkwise-agent, this machine's arch and Debian release
#   deploy/package/make-deb.sh parkwise-bridge                  # the bridge, the same way
#   deploy/package/make-deb.sh [PACKAGE] arm64 bookworm         # Raspberry Pi OS 12 / Debian 12 (cross build, needs root)
#   deploy/package/make-deb.sh [PACKAGE] arm64 trixie           # Raspberry Pi OS 13 / Debian 13 (cross build, needs root)
# PARKWISE_DEB_OUT=DIR puts the .deb there (default .build/deb). The binary has the Swift runtime
# linked in statically: nothing of the toolchain is needed on the board or the backend's host.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=deploy/package/cross-env.sh
source deploy/package/cross-env.sh
out=${PARKWISE_DEB_OUT:-.build/deb}
mkdir -p "$out" .build
log=$PWD/.build/make-deb.log
: >"$log"

package=parkwise-agent
case "${1:-}" in
    parkwise-agent | parkwise-bridge) package=$1; shift ;;
    parkwise-*) echo "make-deb: no package $1 (parkwise-agent or parkwise-bridge)" >&2; exit 64 ;;
esac
# The package's own files: its maintainer scripts and changelog (the agent's in deploy/package, the bridge's in
# deploy/package/bridge), and what it installs (package_files_*, below).
case $package in
    parkwise-agent) files=deploy/package ;;
    parkwise-bridge) files=deploy/package/bridge ;;
esac
arch=${1:-$(dpkg --print-architecture)}
if [ "$arch" = "$(dpkg --print-architecture)" ]; then
    suite=${2:-$(. /etc/os-release && echo "$VERSION_CODENAME")}
    bash deploy/dev/setup.sh
    install_missing binutils python3
    quiet swift build -c release --static-swift-stdlib -Xlinker -znow --product "$package"
    binary=.build/release/$package
    program=("$binary")
    # The symbols/shlibs files of the host packages that own the libraries the binary loads (as dpkg-shlibdeps finds
    # them), not every package's: a cross toolchain's packages claim the same sonames (libgcc-s1-arm64-cross has
    # libgcc_s.so.1), and the .deb would depend on them.
    control_files=()
    while read -r owner; do
        for f in "/var/lib/dpkg/info/$owner.symbols" "/var/lib/dpkg/info/$owner.shlibs"; do
            if [ -e "$f" ]; then control_files+=("$f"); fi
        done
    done < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {p = $3; sub(/^\/usr/, "", p); print p; print "/usr" p}' |
        { xargs dpkg -S 2>/dev/null || true; } | sed 's/: .*//' | sort -u)   # merged /usr: a package ships one of the two
elif [ "$arch" = arm64 ]; then
    suite=${2:-}
    cross_check_suite "$suite"
    install_missing qemu-user-static binutils python3
    binary=$(bash deploy/package/cross-build.sh "$suite" "$package")
    sysroot=$(cross_sysroot "$suite")
    program=(qemu-aarch64-static -L "$sysroot" "$binary")
    control_files=("$sysroot"/.control/*/symbols "$sysroot"/.control/*/shlibs)
else
    echo "usage: $0 [parkwise-agent|parkwise-bridge] [arm64 bookworm|trixie]" >&2
    exit 64
fi
cross_check_suite "$suite"
release=$(cross_debian_release "$suite")
# bookworm keeps systemd and udev files in /lib, trixie (merged /usr) in /usr/lib.
libdir=lib
[ "$suite" = bookworm ] || libdir=usr/lib

upstream=$("${program[@]}" --version | awk 'NR == 1 {print $2}')   # NAME VERSION (wire contract ...)
changelog=$files/changelog
# The changelog's top entry is UPSTREAM-REVISION: a packaging-only fix is a new revision of the same program.
top=$(sed -n "1s/^$package (\\([^)]*\\)).*/\\1/p" "$changelog")
revision=${top#"$upstream"-}
[[ $top == "$upstream"-* && $revision =~ ^[0-9]+$ ]] || {
    echo "make-deb: $package is $upstream but $changelog starts with '$top': add an entry '$package ($upstream-1)'" >&2
    exit 1
}
version=$upstream-$revision+deb$release
# The maintainer is a role address, set at build time (PARKWISE_MAINTAINER="Team <role@example.org>"); by default
# the changelog's.
maintainer=${PARKWISE_MAINTAINER:-$(sed -n 's/^ -- \(.*>\)  .*/\1/p;T;q' "$changelog")}
[[ $maintainer =~ ^[^\<\>]+\ \<[^@\<\>\ ]+@[^@\<\>\ ]+\>$ ]] || {
    echo "make-deb: maintainer '$maintainer' is not 'Name <address>' (PARKWISE_MAINTAINER)" >&2
    exit 64
}
# The Swift runtime is linked in statically: a cross build names the Debian source package it came from (Debian
# policy 7.8, Built-Using); the host's toolchain (swift.org's, in /opt/swift) is no Debian package and has none.
built_using=""
if [ "$arch" = arm64 ]; then
    swiftlang=$(find "$CROSS_CACHE/apt-trixie/debs" -maxdepth 1 -name 'swiftlang_*_arm64.deb' -print -quit)
    [ -n "$swiftlang" ] || { echo "make-deb: the cross build left no swiftlang .deb in $CROSS_CACHE/apt-trixie/debs" >&2; exit 1; }
    source=$(dpkg-deb -f "$swiftlang" Source)   # "name (version)" after a binNMU, "name" or nothing otherwise
    source_version=$(sed -n 's/.*(\(.*\))/\1/p' <<<"$source")
    built_using="${source%% *} (= ${source_version:-$(dpkg-deb -f "$swiftlang" Version)})"
    [ -n "$source" ] || built_using="swiftlang (= $(dpkg-deb -f "$swiftlang" Version))"
fi
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH=$(date -d "$(sed -n 's/^ -- .*>  //p;T;q' "$changelog")" +%s)

root=$(mktemp -d /tmp/parkwise-deb.XXXXXX)
trap 'rm -rf "$root"' EXIT
chmod 0755 "$root"
doc=$root/usr/share/doc/$package
share=$root/usr/share/$package

# The agent: the unit, the udev rule for /dev/gpiochip*, and the config the postinst puts in
# /etc/parkwise-agent/agent.yaml on the first install (never a conffile: every board edits it, so a changed example
# would stop unattended upgrades at a conffile prompt), with its device id left for the installer to set: an unedited
# config is refused (check-config and run exit 78), so two boards can never publish under the example's id and mix
# their events.
package_files_agent() {
    install -D -m 0644 deploy/package/60-parkwise-agent-gpio.rules "$root/$libdir/udev/rules.d/60-parkwise-agent-gpio.rules"
    install -d -m 0755 "$share"
    sed 's/^device: .*/device: ""   # set this board'"'"'s id, unique within the site (e.g. lot-b-gate)/' \
        hardware/examples/single-gate.yaml >"$share/agent.yaml"
    grep -q '^device: ""' "$share/agent.yaml" || { echo "make-deb: the example has no device: line" >&2; exit 1; }
    chmod 0644 "$share/agent.yaml"
    install -D -m 0644 README.md "$doc/README.md"
    install -D -m 0644 hardware/TRACES.md "$doc/TRACES.md"
    install -D -m 0644 deploy/backend/CONTRACT.md "$doc/CONTRACT.md"
    install -D -m 0644 deploy/systemd/README.md "$doc/SYSTEMD.md"
    install -D -m 0644 hardware/examples/campus.yaml "$doc/examples/campus.yaml"
    install -D -m 0644 hardware/examples/single-gate.yaml "$doc/examples/single-gate.yaml"
    man_files=("/etc/parkwise-agent/agent.yaml:The configuration the service runs with."
        "/var/lib/parkwise-agent:Outbox and counters of the service.")
    description="ParkWise gate & sensor agent
 Reads a parking garage's lane loops and spot presence sensors through
 libgpiod and publishes occupancy, passages, check-ins and faults over MQTT
 with a durable outbox. Built for Debian $release / Raspberry Pi OS $suite."
}
# The bridge: the unit, and the templates of /etc/parkwise-bridge/environment and bridge.yaml that the postinst
# installs when there are none (not conffiles, for the same reason as the agent's config; DATABASE_URL is left empty,
# so an unedited service refuses to start rather than guess a database).
package_files_bridge() {
    install -D -m 0644 deploy/package/bridge/environment "$share/environment"
    install -D -m 0644 deploy/package/bridge/bridge.yaml "$share/bridge.yaml"
    install -D -m 0644 deploy/backend/README.md "$doc/README.md"
    install -D -m 0644 deploy/backend/CONTRACT.md "$doc/CONTRACT.md"
    install -D -m 0644 deploy/backend/DELIVERY-GAPS.md "$doc/DELIVERY-GAPS.md"
    man_files=("/etc/parkwise-bridge/environment:DATABASE_URL and BROKER_URL of the service (0600 root)."
        "/etc/parkwise-bridge/bridge.yaml:The settings the service runs with (parkwise-bridge check-config)."
        "/var/lib/prometheus/node-exporter/parkwise-bridge.prom:The figures for Prometheus, when bridge.yaml's metrics_file names it.")
    description="ParkWise backend bridge: sensor feed to PostgreSQL
 Reads the ParkWise agents' MQTT feed (occupancy, passages, check-ins,
 faults) and writes it into the ParkWise backend's PostgreSQL tables, as the
 backend's simulator did. Built for Debian $release."
}

install -D -m 0755 "$binary" "$root/usr/bin/$package"
if [ "$arch" = "$(dpkg --print-architecture)" ]; then strip --remove-section=.comment --remove-section=.note "$root/usr/bin/$package"; fi  # cross: --strip-all
install -D -m 0644 "deploy/systemd/$package.service" "$root/$libdir/systemd/system/$package.service"
"package_files_${package#parkwise-}"
sed "1s/^$package ($top) [a-z]*;/$package ($version) $suite;/" "$changelog" | gzip -9n >"$doc/changelog.Debian.gz"
# One copyright file: the packages differ only in their name.
sed "s/parkwise-agent/$package/g" deploy/package/copyright >"$doc/copyright"
mkdir -p "$root/usr/share/man/man1"
python3 deploy/package/help2man.py "$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)" "${man_files[@]}" -- "${program[@]}" \
    | gzip -9n >"$root/usr/share/man/man1/$package.1.gz"
chmod 0644 "$doc/changelog.Debian.gz" "$doc/copyright" "$root/usr/share/man/man1/$package.1.gz"

depends="adduser, $(python3 deploy/package/shlibdeps.py "$binary" "${control_files[@]}")"
mkdir -p "$root/DEBIAN"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
cat >"$root/DEBIAN/control" <<CONTROL
Package: $package
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends
${built_using:+Built-Using: $built_using
}Section: net
Priority: optional
Description: $description
CONTROL
for script in postinst prerm postrm; do
    install -m 0755 "$files/$script" "$root/DEBIAN/$script"
done
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"
deb=$out/${package}_${version}_${arch}.deb
quiet dpkg-deb --root-owner-group -Zxz --build "$root" "$deb"
echo "make-deb: $deb ($(stat -c %s "$deb") bytes, binary $(stat -c %s "$root/usr/bin/$package") bytes)" >&2
echo "$deb"
