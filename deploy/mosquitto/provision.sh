#!/usr/bin/env bash
# Provisions one board on the broker host, in one command (README.md, "Provision a board"):
#   sudo deploy/mosquitto/provision.sh SITE DEVICE [SPOTS]
#   sudo PARKWISE_BROKER_URL=mqtts://mqtt.garage.lan:8884 deploy/mosquitto/provision.sh uniandes p2-a p2-a.yaml
# A device id is the installer's name for the board (the agent's `device:`, e.g. p2-east: level, then where), unique
# on this broker for ever: one in the register (devices), the password file, the ACL or the CA's certificates is
# refused, revoked ones too (the backend's history knows it: a second board under it would mix their events).
# Then: a password entry and a client certificate (CN = DEVICE) from the site's CA, the device's block in acl.conf
# (write its own tree, read its own commands), the broker reloaded, and SITE-DEVICE.tar in PARKWISE_BUNDLE_DIR (default:
# here), mode 0600: the board's /etc/parkwise-agent files with their owners and modes, and the line that installs it.
# SPOTS: the board's levels and spots as `parkwise-bridge export-config --level L [--zone Z] --output SPOTS` wrote them
# (without --site/--device): they become the bundle's agent.yaml's, so the board's config is whole but for the spots'
# inputs (UNSET: `parkwise-agent walk-test --learn` writes them). Without SPOTS the config ends where they go.
#   PARKWISE_BROKER_URL   what the board connects to (default mqtts://$(hostname -f):8884, the mutual TLS listener;
#                         :8883 uses the password instead); the server certificate must name that host (make-certs.sh)
#   PARKWISE_BOARD        the config's `board:` (default auto: the Raspberry Pi model the board says it is)
# Also PARKWISE_BROKER_DIR and PARKWISE_MOSQUITTO_PID (devices.sh).
set -euo pipefail
here=$(dirname "$0")
# shellcheck source=deploy/mosquitto/devices.sh
source "$here/devices.sh"
# shellcheck source=deploy/mosquitto/crl.sh
source "$here/crl.sh"
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: $0 SITE DEVICE [SPOTS]" >&2; exit 64; }
site=$1 device=$2 spots=${3:-}
check_names "$site" "$device"
url=${PARKWISE_BROKER_URL:-mqtts://$(hostname -f):8884}
[[ $url =~ ^mqtts?://[^/]+$ ]] || fail "PARKWISE_BROKER_URL '$url' is not mqtts://HOST:PORT (or mqtt://)"
board=${PARKWISE_BOARD:-auto}
[[ $board =~ ^[a-z0-9-]+$ ]] || fail "PARKWISE_BOARD '$board' is not a board name (auto, raspberry-pi-4, raspberry-pi-5, ...)"
if [ -n "$spots" ]; then
    # Checked before anything changes: the levels and spots sections alone, as export-config writes them.
    [ -f "$spots" ] && [ -r "$spots" ] || fail "SPOTS $spots: no such readable file (parkwise-bridge export-config --output writes it)"
    grep -q '^levels:' "$spots" && grep -q '^spots:' "$spots" ||
        fail "SPOTS $spots has no levels: and spots: sections: write it with parkwise-bridge export-config --level L --output $spots"
    top=$(awk '/^[a-z_]+:/ && $1 != "levels:" && $1 != "spots:" { print $1; exit }' "$spots")
    [ -z "$top" ] || fail "SPOTS $spots has its own '$top' (a whole config): export it without --site and --device"
fi
out=${PARKWISE_BUNDLE_DIR:-$PWD}
lock_register

known=$(registered "$device")
[ -z "$known" ] || fail "device id $device is taken ($known): ids are never reused; give this board another (e.g. $device-2)"
! grep -q "^$device:" "$passwd" || fail "device id $device is in $passwd already (added by hand?): pick another id"
! grep -qx "user $device" "$acl" || fail "device id $device has ACL entries in $acl already: pick another id"
[ ! -e "$certs/$device.crt" ] || fail "a certificate $certs/$device.crt exists already: pick another device id"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
etc=$stage/etc/parkwise-agent
mkdir -p "$etc"
umask 077

# The certificate (CN = DEVICE, clientAuth) from the site's CA; its key leaves the broker host in the bundle only.
bash "$here/make-certs.sh" "$certs" "$device" 2>"$stage/certs.log" || { cat "$stage/certs.log" >&2; fail "make-certs.sh"; }
mv "$certs/$device.key" "$etc/$device.key"
cp "$certs/ca.crt" "$certs/$device.crt" "$etc/"

# The password: hashed by mosquitto_passwd from a file (never on a command line), appended to the password file.
password=$(openssl rand -hex 24)
printf 'username=%s\npassword=%s\n' "$device" "$password" >"$etc/credentials"
printf '%s:%s\n' "$device" "$password" >"$stage/plain"
mosquitto_passwd -U "$stage/plain" >/dev/null || fail "mosquitto_passwd -U could not hash the password"
cat "$stage/plain" >>"$passwd"

ACL_NOTE="provisioned $(now)"
set_acl_block "$site" "$device" \
    "topic write parkwise/v1/$site/$device/status" "topic write parkwise/v1/$site/$device/events" \
    "topic write parkwise/v1/$site/$device/state/#" "topic write parkwise/v1/$site/$device/reply" \
    "topic read parkwise/v1/$site/$device/cmd/#" "topic readwrite parkwise/v1/$site/$device/doctor"
crl_issue "$certs"   # (a fresh next-update date)
echo "$device $site provisioned $(now)" >>"$register"
admin_login
reload_broker
# The site's register: the spots this board may report (the bridge refuses them from any other), none without SPOTS.
mapfile -t spot_list < <([ -z "$spots" ] || spot_ids "$spots")
give_spots "$site" "$device" "$(rev_now)" "${spot_list[@]}"

# The board's config: its broker and files here, then its levels and spots (from SPOTS, else still to come:
# hardware/COMMISSIONING.md).
next="Next: the levels, lanes and spots (hardware/COMMISSIONING.md), then parkwise-agent check-config."
[ -z "$spots" ] || next="Next: sudo parkwise-agent walk-test --learn (each spot's input), then parkwise-agent doctor."
cat >"$etc/agent.yaml" <<YAML
# $site/$device, provisioned $(now) by deploy/mosquitto/provision.sh on $(hostname).
# $next
site: $site
device: $device
board: $board
mqtt:
  brokers: ["$url"]
  credentials: /etc/parkwise-agent/credentials
  tls: { ca: /etc/parkwise-agent/ca.crt, cert: /etc/parkwise-agent/$device.crt, key: /etc/parkwise-agent/$device.key }
outbox: { path: /var/lib/parkwise-agent/outbox }
YAML
[ -z "$spots" ] || cat "$spots" >>"$etc/agent.yaml"
chmod 0644 "$etc/ca.crt" "$etc/$device.crt"
chmod 0640 "$etc/agent.yaml"
chmod 0600 "$etc/credentials" "$etc/$device.key"
# Owners by name (the board's package made user and group parkwise; a board without them gets root's, which the
# agent's check-config reports): the service reads its secrets as parkwise, the config through group parkwise.
bundle=$out/$site-$device.tar
tar_in() { tar -C "$stage" -rf "$bundle.new" --owner="$1" --group="$2" "${@:3}"; }
rm -f "$bundle.new"
tar_in root:0 root:0 "etc/parkwise-agent/ca.crt" "etc/parkwise-agent/$device.crt"
tar_in root:0 parkwise:0 etc/parkwise-agent/agent.yaml
tar_in parkwise:0 parkwise:0 etc/parkwise-agent/credentials "etc/parkwise-agent/$device.key"
mv "$bundle.new" "$bundle"
echo "provision: $site/$device: password, certificate (CN $device), ACL for parkwise/v1/$site/$device/, broker reloaded" >&2
then="then the levels, lanes and spots, and check-config"
[ -z "$spots" ] || then="its config has the spots of $spots; then walk-test --learn and doctor"
echo "provision: bundle $bundle (secrets: copy it to the board, then delete it here). On the board (package installed;" \
    "$then: hardware/COMMISSIONING.md):" >&2
echo "  sudo tar -xpf $(basename "$bundle") -C /"
