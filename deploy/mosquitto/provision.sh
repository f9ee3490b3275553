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
# shellcheck source=deploy/mosquitto/bundle.sh
source "$here/bundle.sh"   # (and devices.sh, crl.sh)
bundle_arguments "SITE DEVICE [SPOTS]" "$@"
lock_register

known=$(registered "$device")
[ -z "$known" ] || fail "device id $device is taken ($known): ids are never reused; give this board another (e.g. $device-2)"
! grep -q "^$device:" "$passwd" || fail "device id $device is in $passwd already (added by hand?): pick another id"
! grep -qx "user $device" "$acl" || fail "device id $device has ACL entries in $acl already: pick another id"
[ ! -e "$certs/$device.crt" ] || fail "a certificate $certs/$device.crt exists already: pick another device id"

begin_bundle
new_certificate "$device"
new_password "$device"
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

write_config "$site" "$device" "$spots" provisioned
pack_bundle "$site-$device"
echo "provision: $site/$device: password, certificate (CN $device), ACL for parkwise/v1/$site/$device/, broker reloaded" >&2
then="then the levels, lanes and spots, and check-config"
[ -z "$spots" ] || then="its config has the spots of $spots; then walk-test --learn and doctor"
echo "provision: bundle $bundle (secrets: copy it to the board, then delete it here). On the board (package installed;" \
    "$then: hardware/COMMISSIONING.md):" >&2
echo "  sudo tar -xpf $(basename "$bundle") -C /"
