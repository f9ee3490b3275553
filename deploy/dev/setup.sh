#!/usr/bin/env bash
# Installs what building and testing the agent needs, from Debian's packages (sudo when not root).
# Safe to run again: installs only what is missing.
set -euo pipefail

packages=(pkg-config libgpiod-dev gpiod libmosquitto-dev mosquitto mosquitto-clients libyaml-dev openssl python3-jsonschema
          postgresql libpq-dev prometheus prometheus-node-exporter nats-server shellcheck)

if ! command -v swift >/dev/null 2>&1; then
    echo "setup: the Swift 6 toolchain is not on PATH." >&2
    echo "setup: install it from swift.org (or swiftly) and put its usr/bin on PATH, then run this again." >&2
    exit 1
fi

# The GPIO test VM compiles libgpiod 2.x from PyPI's gpiod source distribution: it needs pip.
if ! python3 -m pip --version >/dev/null 2>&1 && ! command -v pip3 >/dev/null 2>&1; then
    packages+=(python3-pip)
fi

missing=()
for p in "${packages[@]}"; do
    [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" == *"ok installed"* ]] || missing+=("$p")
done

if ((${#missing[@]})); then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing ${missing[*]}" >&2
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
fi
