# Sourced by provision.sh and revoke.sh: the broker host's register of devices and what the broker reads for them.
#   PARKWISE_BROKER_DIR   default /etc/mosquitto/parkwise: passwd, acl.conf, certs/ (ca.crt, ca.key, crl.pem), devices
#   PARKWISE_MOSQUITTO_PID   signal this mosquitto (SIGHUP) instead of `systemctl reload mosquitto`
# shellcheck shell=bash
broker_dir=${PARKWISE_BROKER_DIR:-/etc/mosquitto/parkwise}
certs=$broker_dir/certs
register=$broker_dir/devices   # one line per device id ever provisioned: DEVICE SITE provisioned|revoked TIME
passwd=$broker_dir/passwd
acl=$broker_dir/acl.conf

fail() { echo "${0##*/}: $*" >&2; exit 1; }

# check_names SITE DEVICE: both are one topic level and a usable MQTT username / certificate CN.
check_names() {
    [[ $1 =~ ^[A-Za-z0-9._-]+$ ]] || fail "site '$1' is not a topic part: letters, digits, - _ . only (as in the agent's config)"
    [[ $2 =~ ^[A-Za-z0-9._-]+$ ]] ||
        fail "device id '$2' is not a topic part: letters, digits, - _ . only (e.g. p2-east: level, then where on it)"
    case $2 in
        server | ca | parkwise-backend | crl) fail "'$2' is a name the broker uses itself: pick another device id" ;;
    esac
    local f
    for f in "$passwd" "$acl" "$certs/ca.crt" "$certs/ca.key"; do
        [ -f "$f" ] || fail "no $f: set up the broker first (deploy/mosquitto/README.md, Install) or set PARKWISE_BROKER_DIR"
    done
}

# lock_register: holds the register's lock until the script ends (one provision or revoke at a time).
lock_register() {
    exec 9>>"$register.lock"
    flock -w 60 9 || fail "another provision or revoke holds $register.lock for more than 60 s"
    [ -e "$register" ] || install -m 0600 /dev/null "$register"
}

# registered DEVICE: prints the device's register line, if any.
registered() { awk -v d="$1" '$1 == d' "$register"; }

# now: the time in the register and the ACL's comments.
now() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# replace_file FILE: moves FILE.new over FILE keeping FILE's owner and mode (mosquitto reads it as its own user).
replace_file() {
    chown --reference="$1" "$1.new" && chmod --reference="$1" "$1.new" && mv "$1.new" "$1"
}

# set_acl_block SITE DEVICE [LINE...]: the device's block of acl.conf (between its two marker comments) becomes
# `user DEVICE` and the lines given; the rest of the file is kept as it is.
set_acl_block() {
    local site=$1 device=$2 begin end
    shift 2
    begin="# parkwise device $site/$device:"
    end="# end of parkwise device $site/$device"
    {
        awk -v b="$begin" -v e="$end" 'index($0, b) == 1 { skip = 1 } !skip { print } $0 == e { skip = 0 }' "$acl"
        printf '%s\n' "$begin $ACL_NOTE" "user $device" "$@" "$end"
    } >"$acl.new"
    replace_file "$acl"
}

# reload_broker: mosquitto reads the password file, the ACL and the CRL again (SIGHUP; `systemctl reload` sends it).
reload_broker() {
    if [ -n "${PARKWISE_MOSQUITTO_PID:-}" ]; then
        kill -HUP "$PARKWISE_MOSQUITTO_PID" ||
            fail "cannot signal mosquitto (PID $PARKWISE_MOSQUITTO_PID): the files are changed, reload it by hand"
    elif systemctl is-active --quiet mosquitto 2>/dev/null; then
        systemctl reload mosquitto || fail "systemctl reload mosquitto failed: the files are changed, reload it by hand"
    else
        fail "mosquitto does not run under systemd here: give its PID as PARKWISE_MOSQUITTO_PID (the files are changed)"
    fi
}
