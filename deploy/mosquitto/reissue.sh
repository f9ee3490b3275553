#!/usr/bin/env bash
# A provisioned board's certificate renewed, or its whole bundle made again, under the same device id, in one command
# on the broker host (README.md, "Renew a certificate, reissue a lost bundle"):
#   sudo deploy/mosquitto/reissue.sh SITE DEVICE --certificate   # its certificate expired, or soon will
#   sudo deploy/mosquitto/reissue.sh SITE DEVICE [SPOTS]         # its bundle is lost (SD card replaced, files deleted)
# --certificate: a new key and certificate (CN = DEVICE, valid DAYS as make-certs.sh) in SITE-DEVICE-certificate.tar,
# nothing else changed; the old certificate stays valid to its own end (the board connects with it until it has the
# new one). A whole reissue treats the lost files as held by someone else: every certificate the device had goes into
# the CRL, its password is replaced and the broker reloaded (a new login with the old password or an old certificate is
# refused), then SITE-DEVICE.tar is made as provision.sh makes it (SPOTS as there; without it the config ends where the
# levels go: on a board whose config survived, extract with --exclude=etc/parkwise-agent/agent.yaml).
# The device's ACL, register entry and spots, and the backend's history stay: it is the same device.
# Also PARKWISE_BROKER_URL, PARKWISE_BOARD (provision.sh), PARKWISE_BROKER_DIR, PARKWISE_MOSQUITTO_PID, PARKWISE_BUNDLE_DIR.
set -euo pipefail
here=$(dirname "$0")
# shellcheck source=deploy/mosquitto/bundle.sh
source "$here/bundle.sh"   # (and devices.sh, crl.sh)
bundle_arguments "SITE DEVICE --certificate | SITE DEVICE [SPOTS]" "$@"
lock_register
provisioned_here "$site" "$device" "provision.sh $site $device makes its first bundle"
begin_bundle

if [ "$spots" = --certificate ]; then
    new_certificate "$device"
    rm "$etc/ca.crt"   # the board has it, and the CA is the same
    pack_bundle "$site-$device-certificate"
    echo "reissue: $site/$device: a new certificate (CN $device, $(openssl x509 -in "$certs/$device.crt" -noout -enddate));" \
        "the old one stays valid to its end. Bundle $bundle (a secret: copy it to the board, then delete it here). On the board:" >&2
    echo "  sudo tar -xpf $(basename "$bundle") -C / && sudo systemctl restart parkwise-agent"
    exit 0
fi

revoke_certificates "$certs" "$device" ||
    echo "reissue: no certificate of $device on file in $certs (deleted?): none could be revoked" >&2
new_certificate "$device"
new_password "$device"
crl_issue "$certs"
reload_broker
if [ -n "$spots" ]; then
    mapfile -t spot_list < <(spot_ids "$spots")
    give_spots "$site" "$device" "$(rev_now)" "${spot_list[@]}"
fi
write_config "$site" "$device" "$spots" reissued
pack_bundle "$site-$device"
echo "reissue: $site/$device: its old certificates revoked, a new certificate and password, broker reloaded; its spots" \
    "and history kept. Bundle $bundle (secrets: copy it to the board, then delete it here). On the board (package" \
    "installed; then walk-test --learn unless the wiring is in the config: hardware/COMMISSIONING.md):" >&2
echo "  sudo tar -xpf $(basename "$bundle") -C /"
