#!/usr/bin/env bash
# Revokes one board on the broker host, in one command (README.md, "Revoke a board"):
#   sudo deploy/mosquitto/revoke.sh SITE DEVICE
#   sudo deploy/mosquitto/revoke.sh --renew-crl      # only issues the CRL anew (before its date: crl.sh)
# Removes the device's password entry, turns its ACL block into `topic deny #`, adds its certificate to the CA's
# revocation list (crl.pem; those of earlier reissues too) and reloads the broker. Then a login with its password is refused, a TLS handshake with
# its certificate fails, and a connection it made before: the password one is closed at the reload, the certificate one
# (mosquitto does not check a CRL again on open connections) may publish nothing and read nothing any more. The id
# stays in the register as revoked: it is never given to another board.
# Also PARKWISE_BROKER_DIR and PARKWISE_MOSQUITTO_PID (devices.sh).
set -euo pipefail
here=$(dirname "$0")
# shellcheck source=deploy/mosquitto/devices.sh
source "$here/devices.sh"
# shellcheck source=deploy/mosquitto/crl.sh
source "$here/crl.sh"
if [ "${1:-}" = --renew-crl ] && [ $# -eq 1 ]; then
    lock_register
    crl_issue "$certs"
    reload_broker
    echo "revoke: $certs/crl.pem issued anew ($(openssl crl -in "$certs/crl.pem" -noout -nextupdate)), broker reloaded" >&2
    exit 0
fi
[ $# -eq 2 ] || { echo "usage: $0 SITE DEVICE | --renew-crl" >&2; exit 64; }
site=$1 device=$2
check_names "$site" "$device"
lock_register
provisioned_here "$site" "$device" "nothing to revoke"

mosquitto_passwd -D "$passwd" "$device" >/dev/null || fail "mosquitto_passwd -D $passwd $device failed"
ACL_NOTE="revoked $(now): denied everything, also on a connection made before"
set_acl_block "$site" "$device" "topic deny #"
revoke_certificates "$certs" "$device" ||
    echo "revoke: no $certs/$device.crt (deleted?): its certificate cannot be put in the CRL; the ACL still denies it" >&2
awk -v d="$device" -v t="$(now)" '$1 == d { $3 = "revoked"; $4 = t } { print }' "$register" >"$register.new"
replace_file "$register"
admin_login
reload_broker
echo "revoke: $site/$device: password removed, ACL denies it, certificate in the CRL, broker reloaded" >&2
# The bridge learns it from the register (for good: a broker restart cannot bring the board back), and the board's
# retained status and states leave the broker, so no subscriber sees a ghost online.
[ ! -e "$owned/$device" ] || mv "$owned/$device" "$owned/$device.revoked"
publish_entry "$site" "$device" revoked "$(rev_now)"
clear_retained "$site" "$device"
echo "revoke: $site/$device: revoked in the site's register (parkwise-bridge ignores it from now on), its retained topics cleared" >&2
