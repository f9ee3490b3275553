#!/usr/bin/env bash
# Builds parkwise-agent_<version>_<arch>.deb for the board: the release binary with the Swift
# runtime linked in statically (no toolchain on the board), the systemd unit, an example config.
# Build on the board's architecture (arm64 for a Pi 4/5 with a 64-bit OS).
#   deploy/package/make-deb.sh [output-dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-.build/deb}

bash deploy/dev/setup.sh
swift build -c release --static-swift-stdlib --product parkwise-agent 2>&1 | tail -n 1
version=$(.build/release/parkwise-agent version | awk '{print $2}')
arch=$(dpkg --print-architecture)
root=$(mktemp -d /tmp/parkwise-deb.XXXXXX)
trap 'rm -rf "$root"' EXIT
chmod 0755 "$root"
# The packages of the shared libraries the binary was linked against (libgpiod 1.6 or 2.x, ...).
owner() { dpkg -S "$1" 2>/dev/null || dpkg -S "${1#/usr}" 2>/dev/null || true; }
depends=$(for lib in $(ldd .build/release/parkwise-agent | awk '/=> \//{print $3}'); do owner "$(realpath "$lib")"; done \
    | cut -d: -f1 | sort -u | paste -sd, | sed 's/,/, /g')

install -D -m 0755 .build/release/parkwise-agent "$root/usr/bin/parkwise-agent"
strip "$root/usr/bin/parkwise-agent"
install -D -m 0644 deploy/systemd/parkwise-agent.service "$root/lib/systemd/system/parkwise-agent.service"
install -D -m 0640 hardware/examples/single-gate.yaml "$root/etc/parkwise-agent/agent.yaml"
install -D -m 0644 README.md "$root/usr/share/doc/parkwise-agent/README.md"
install -D -m 0644 hardware/TRACES.md "$root/usr/share/doc/parkwise-agent/TRACES.md"
install -D -m 0644 deploy/backend/CONTRACT.md "$root/usr/share/doc/parkwise-agent/CONTRACT.md"
mkdir -p "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CONTROL
Package: parkwise-agent
Version: $version
Architecture: $arch
Maintainer: ParkWise <parkwise@localhost>
Depends: $depends
Section: net
Priority: optional
Description: ParkWise gate & sensor agent
 Reads a parking garage's lane loops and spot presence sensors through libgpiod and publishes
 occupancy, passages, check-ins and faults over MQTT with a durable outbox.
CONTROL
echo "/etc/parkwise-agent/agent.yaml" > "$root/DEBIAN/conffiles"
cat > "$root/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    getent group gpio >/dev/null || addgroup --system gpio
    getent passwd parkwise >/dev/null || adduser --system --group --home /var/lib/parkwise-agent --no-create-home parkwise
    adduser parkwise gpio >/dev/null
    chgrp parkwise /etc/parkwise-agent /etc/parkwise-agent/agent.yaml
    chmod 0750 /etc/parkwise-agent
    systemctl daemon-reload >/dev/null 2>&1 || true
    echo "parkwise-agent: edit /etc/parkwise-agent/agent.yaml, check it with 'parkwise-agent check-config', then 'systemctl enable --now parkwise-agent'"
fi
POSTINST
chmod 0755 "$root/DEBIAN/postinst"
mkdir -p "$out"
dpkg-deb --root-owner-group --build "$root" "$out/parkwise-agent_${version}_${arch}.deb"
