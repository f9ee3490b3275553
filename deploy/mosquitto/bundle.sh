# Sourced by provision.sh and reissue.sh (it sources devices.sh and crl.sh): a board's secrets and its bundle, the
# /etc/parkwise-agent files a board extracts with `tar -xpf BUNDLE -C /`, with the owners and modes its service needs.
# shellcheck shell=bash
# shellcheck disable=SC2154  # ($here: the directory of the script that sources this)
# shellcheck source=deploy/mosquitto/devices.sh
source "$here/devices.sh"
# shellcheck source=deploy/mosquitto/crl.sh
source "$here/crl.sh"

# check_spots_file SPOTS: the board's levels and spots as `parkwise-bridge export-config --level L [--zone Z]
# --output SPOTS` wrote them (without --site/--device), checked before anything changes.
check_spots_file() {
    { [ -f "$1" ] && [ -r "$1" ]; } || fail "SPOTS $1: no such readable file (parkwise-bridge export-config --output writes it)"
    { grep -q '^levels:' "$1" && grep -q '^spots:' "$1"; } ||
        fail "SPOTS $1 has no levels: and spots: sections: write it with parkwise-bridge export-config --level L --output $1"
    local top
    top=$(awk '/^[a-z_]+:/ && $1 != "levels:" && $1 != "spots:" { print $1; exit }' "$1")
    [ -z "$top" ] || fail "SPOTS $1 has its own '$top' (a whole config): export it without --site and --device"
}

# bundle_arguments USAGE ARG...: SITE DEVICE [SPOTS] (or reissue.sh's --certificate) into $site, $device, $spots, checked
# before anything changes, with the broker settings (broker_settings).
bundle_arguments() {
    [ $# -eq 3 ] || [ $# -eq 4 ] || { echo "usage: ${0##*/} $1" >&2; exit 64; }
    site=$2 device=$3 spots=${4:-}
    check_names "$site" "$device"
    broker_settings
    [ -z "$spots" ] || [ "$spots" = --certificate ] || check_spots_file "$spots"
}

# begin_bundle: an empty stage ($stage, its etc/parkwise-agent as $etc), removed at exit.
begin_bundle() {
    stage=$(mktemp -d)
    trap 'rm -rf "$stage"' EXIT
    etc=$stage/etc/parkwise-agent
    mkdir -p "$etc"
    umask 077
}

# new_certificate DEVICE: a key and certificate (CN = DEVICE, clientAuth) from the site's CA, with ca.crt, into the
# stage; the key leaves the broker host in the bundle only. A certificate the device had is kept in certs/issued/
# (crl.sh's revoke_certificates finds it there).
new_certificate() {
    local serial
    if [ -e "$certs/$1.crt" ]; then
        serial=$(openssl x509 -in "$certs/$1.crt" -noout -serial | cut -d= -f2)
        mkdir -p "$certs/issued"
        mv "$certs/$1.crt" "$certs/issued/$1.$serial.crt"
    fi
    bash "$here/make-certs.sh" "$certs" "$1" 2>"$stage/certs.log" || { cat "$stage/certs.log" >&2; fail "make-certs.sh"; }
    mv "$certs/$1.key" "$etc/$1.key"
    cp "$certs/ca.crt" "$certs/$1.crt" "$etc/"
    chmod 0644 "$etc/ca.crt" "$etc/$1.crt"
    chmod 0600 "$etc/$1.key"
}

# new_password DEVICE: a password (48 hex digits) in the stage's credentials; its hash (mosquitto_passwd -U, from a
# file: never on a command line) replaces the device's entry in the password file.
new_password() {
    local password
    password=$(openssl rand -hex 24)
    printf 'username=%s\npassword=%s\n' "$1" "$password" >"$etc/credentials"
    chmod 0600 "$etc/credentials"
    printf '%s:%s\n' "$1" "$password" >"$stage/plain"
    mosquitto_passwd -U "$stage/plain" >/dev/null || fail "mosquitto_passwd -U could not hash the password"
    { awk -F: -v d="$1" '$1 != d' "$passwd"; cat "$stage/plain"; } >"$passwd.new"
    replace_file "$passwd"
}

# write_config SITE DEVICE SPOTS WHY: the stage's agent.yaml: the board's broker and files, then the levels and spots
# of SPOTS (their inputs UNSET: walk-test --learn writes them), or, without SPOTS, the config ends where they go
# (hardware/COMMISSIONING.md). WHY is its first line's verb (provisioned, reissued). PARKWISE_BROKER_URL, PARKWISE_BOARD.
write_config() {
    local next="Next: the levels, lanes and spots (hardware/COMMISSIONING.md), then parkwise-agent check-config."
    [ -z "$3" ] || next="Next: sudo parkwise-agent walk-test --learn (each spot's input), then parkwise-agent doctor."
    cat >"$etc/agent.yaml" <<YAML
# $1/$2, $4 $(now) by deploy/mosquitto/${0##*/} on $(hostname).
# $next
site: $1
device: $2
board: $board
mqtt:
  brokers: ["$url"]
  credentials: /etc/parkwise-agent/credentials
  tls: { ca: /etc/parkwise-agent/ca.crt, cert: /etc/parkwise-agent/$2.crt, key: /etc/parkwise-agent/$2.key }
outbox: { path: /var/lib/parkwise-agent/outbox }
YAML
    [ -z "$3" ] || cat "$3" >>"$etc/agent.yaml"
    chmod 0640 "$etc/agent.yaml"
}

# broker_settings: $url and $board from PARKWISE_BROKER_URL (default mqtts://$(hostname -f):8884, the mutual TLS
# listener) and PARKWISE_BOARD (default auto), checked.
broker_settings() {
    url=${PARKWISE_BROKER_URL:-mqtts://$(hostname -f):8884}
    [[ $url =~ ^mqtts?://[^/]+$ ]] || fail "PARKWISE_BROKER_URL '$url' is not mqtts://HOST:PORT (or mqtt://)"
    board=${PARKWISE_BOARD:-auto}
    [[ $board =~ ^[a-z0-9-]+$ ]] || fail "PARKWISE_BOARD '$board' is not a board name (auto, raspberry-pi-4, raspberry-pi-5, ...)"
}

# pack_bundle NAME: the stage's files in PARKWISE_BUNDLE_DIR/NAME.tar (default: here), mode 0600, as $bundle. Owners by
# name (the board's package made user and group parkwise; a board without them gets root's, which the agent's
# check-config reports): the service reads its secrets (credentials, the key) as parkwise, the config through group
# parkwise; the certificates are root's, readable by all.
pack_bundle() {
    local file owner group
    bundle=${PARKWISE_BUNDLE_DIR:-$PWD}/$1.tar
    rm -f "$bundle.new"
    for file in "$etc"/*; do
        case ${file##*/} in
            credentials | *.key) owner=parkwise group=parkwise ;;
            agent.yaml) owner=root group=parkwise ;;
            *) owner=root group=root ;;
        esac
        tar -C "$stage" -rf "$bundle.new" --owner="$owner:0" --group="$group:0" "etc/parkwise-agent/${file##*/}"
    done
    mv "$bundle.new" "$bundle"
}
