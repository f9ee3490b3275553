#!/usr/bin/env bash
# Gives spots to one board in the site's register, in one command, on the broker host (README.md, "Move spots"):
#   sudo deploy/mosquitto/spots.sh SITE DEVICE SPOT...        # e.g. P2-B-07 P2-B-08: a sensor rewired to DEVICE
#   sudo deploy/mosquitto/spots.sh SITE DEVICE --file SPOTS   # the spots of an export-config file
#   sudo deploy/mosquitto/spots.sh SITE DEVICE --publish      # its entry published again (the broker was down)
# The spots become DEVICE's and stop being any other board's; every entry that changed is published, retained, as
# the admin role. parkwise-bridge (spot_owners: registered) then takes those spots' reports from DEVICE only, and asks
# it for its states again. The board's own config is not changed: give it the spots' inputs (walk-test --learn).
# Also PARKWISE_BROKER_DIR, PARKWISE_MOSQUITTO_PID and PARKWISE_ADMIN_PORT (devices.sh).
set -euo pipefail
here=$(dirname "$0")
# shellcheck source=deploy/mosquitto/devices.sh
source "$here/devices.sh"
[ $# -ge 3 ] || { echo "usage: $0 SITE DEVICE SPOT... | SITE DEVICE --file SPOTS | SITE DEVICE --publish" >&2; exit 64; }
site=$1 device=$2
shift 2
check_names "$site" "$device"
lock_register
provisioned_here "$site" "$device" "provision.sh $site $device first"
case $1 in
    --publish)
        [ $# -eq 1 ] || fail "--publish takes nothing more"
        set -- ;;
    --file)
        { [ $# -eq 2 ] && [ -r "$2" ]; } || fail "--file needs one readable file (parkwise-bridge export-config --output writes it)"
        mapfile -t ids < <(spot_ids "$2")
        [ ${#ids[@]} -gt 0 ] || fail "$2 has no spots: section with ids (write it with parkwise-bridge export-config)"
        set -- "${ids[@]}" ;;
esac
for id in "$@"; do
    [[ $id =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || fail "'$id' is not a spot id like P2-B-07"
done
[ -s "$admin" ] || { admin_login; reload_broker; }
give_spots "$site" "$device" "$(rev_now)" "$@"
