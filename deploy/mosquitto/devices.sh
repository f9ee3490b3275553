# Sourced by provision.sh and revoke.sh: the broker host's register of devices and what the broker reads for them.
#   PARKWISE_BROKER_DIR   default /etc/mosquitto/parkwise: passwd, acl.conf, certs/ (ca.crt, ca.key, crl.pem), devices
#   PARKWISE_MOSQUITTO_PID   signal this mosquitto (SIGHUP) instead of `systemctl reload mosquitto`
#   PARKWISE_ADMIN_PORT   the broker's loopback listener the register is published on (default 1883)
# shellcheck shell=bash
broker_dir=${PARKWISE_BROKER_DIR:-/etc/mosquitto/parkwise}
certs=$broker_dir/certs
register=$broker_dir/devices   # one line per device id ever provisioned: DEVICE SITE provisioned|revoked TIME
passwd=$broker_dir/passwd
acl=$broker_dir/acl.conf
admin=$broker_dir/admin        # the admin role's login (root only): writes the site's register, clears retained topics
owned=$broker_dir/spots        # owned/DEVICE: the spots the register gives DEVICE, one id a line

fail() { echo "${0##*/}: $*" >&2; exit 1; }

# check_names SITE DEVICE: both are one topic level and a usable MQTT username / certificate CN.
check_names() {
    [[ $1 =~ ^[A-Za-z0-9._-]+$ ]] || fail "site '$1' is not a topic part: letters, digits, - _ . only (as in the agent's config)"
    [[ $2 =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] ||
        fail "device id '$2' is not a topic part: a letter or digit, then letters, digits, - _ . (e.g. p2-east: level, then where on it)"
    case $2 in
        server | ca | parkwise-backend | parkwise-admin | crl) fail "'$2' is a name the broker uses itself: pick another device id" ;;
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

# provisioned_here SITE DEVICE WHY: fails unless the register has DEVICE provisioned (not revoked) for SITE; WHY ends
# the message when the device was never provisioned.
provisioned_here() {
    local known known_site state
    known=$(registered "$2")
    [ -n "$known" ] || fail "device id $2 was never provisioned here ($register): $3"
    read -r _ known_site state _ <<<"$known"
    [ "$known_site" = "$1" ] || fail "device id $2 belongs to site $known_site, not $1"
    [ "$state" = provisioned ] || fail "device $1/$2 is $state already ($known)"
}

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

# --- the site's register: which device may report which spots (read by parkwise-bridge, spot_owners: registered) ----
# Each device's entry is a retained message on parkwise/v1/SITE/_register/DEVICE, published as the admin role (the ACL
# lets no device write there): {"state": provisioned|revoked, "spots": [...], "rev": ms, "at": time}.

# admin_login: the admin role's password, made once (into the password file; the caller reloads the broker after).
admin_login() {
    [ -s "$admin" ] && return 0
    local password
    password=$(openssl rand -hex 24)
    install -m 0600 /dev/null "$admin"
    printf -- '-u parkwise-admin\n-P %s\n' "$password" >"$admin"
    printf 'parkwise-admin:%s\n' "$password" >"$admin.plain"
    mosquitto_passwd -U "$admin.plain" >/dev/null || { rm -f "$admin" "$admin.plain"; fail "mosquitto_passwd -U could not hash the admin password"; }
    sed -i '/^parkwise-admin:/d' "$passwd"
    cat "$admin.plain" >>"$passwd"
    rm -f "$admin.plain"
}

# as_admin PROGRAM ARGS...: mosquitto_pub or mosquitto_sub on the loopback listener as the admin role; its options
# file (-u, -P) is read from XDG_CONFIG_HOME, so the password is on no command line. Retried for 15 s while the
# broker's reload (which brings the admin's password) is still under way.
as_admin() {
    local conf out deadline=$((SECONDS + 15))
    conf=$(mktemp -d)
    cp "$admin" "$conf/$1"
    until out=$(XDG_CONFIG_HOME=$conf "$1" -h 127.0.0.1 -p "${PARKWISE_ADMIN_PORT:-1883}" -i "parkwise-admin-$$" "${@:2}" 2>&1); do
        if ((SECONDS >= deadline)); then
            rm -rf "$conf"
            echo "$out" >&2
            return 1
        fi
        sleep 0.2
    done
    rm -rf "$conf"
}

# spot_ids FILE: the spot ids of an export-config file's spots: section (`  - { id: "P1-A-01", ... }`).
spot_ids() {
    awk '/^spots:/ { in_spots = 1; next } /^[a-z_]+:/ { in_spots = 0 }
         in_spots && match($0, /^[ \t]*-[ \t]*\{?[ \t]*id:[ \t]*"?[^",} \t]+/) {
             id = substr($0, RSTART, RLENGTH); sub(/.*id:[ \t]*"?/, "", id); print id }' "$1"
}

# publish_entry SITE DEVICE STATE REV: the device's register entry, its spots from owned/DEVICE.
publish_entry() {
    local list="" id
    if [ "$3" = provisioned ] && [ -s "$owned/$2" ]; then
        while read -r id; do list+="${list:+,}\"$id\""; done <"$owned/$2"
    fi
    as_admin mosquitto_pub -q 1 -r -t "parkwise/v1/$1/_register/$2" \
        -m "{\"at\":\"$(now)\",\"rev\":$4,\"spots\":[$list],\"state\":\"$3\"}" ||
        fail "the register entry of $1/$2 was not published (broker at 127.0.0.1:${PARKWISE_ADMIN_PORT:-1883}): the bridge refuses its spots until it is; once the broker is up: sudo deploy/mosquitto/spots.sh $1 $2 --publish"
}

# give_spots SITE DEVICE REV ID...: the spots become DEVICE's, taken from any other device of the register that had
# them; every entry that changed is published (with REV: the newer entries win at the bridge, whatever their order).
give_spots() {
    local site=$1 device=$2 rev=$3 other changed
    shift 3
    install -d -m 0700 "$owned"
    [ -e "$owned/$device" ] || install -m 0600 /dev/null "$owned/$device"
    local wanted
    wanted=$(printf '%s\n' "$@")
    changed=()
    [ $# -gt 0 ] && for other in "$owned"/*; do
        [ -f "$other" ] || continue
        other=${other##*/}
        [ "$other" = "$device" ] && continue
        [ "$(awk -v d="$other" '$1 == d { print $2 " " $3 }' "$register")" = "$site provisioned" ] || continue
        if grep -qxF -f <(printf '%s\n' "$wanted") "$owned/$other"; then
            grep -vxF -f <(printf '%s\n' "$wanted") "$owned/$other" >"$owned/$other.new" || true
            mv "$owned/$other.new" "$owned/$other"
            changed+=("$other")
        fi
    done
    sort -u "$owned/$device" <(printf '%s\n' "$wanted" | sed '/^$/d') >"$owned/$device.new"
    mv "$owned/$device.new" "$owned/$device"
    for other in "${changed[@]}"; do
        publish_entry "$site" "$other" provisioned "$rev"
        echo "${0##*/}: $site/$other: its entry published without the spots moved ($(wc -l <"$owned/$other") left)" >&2
    done
    publish_entry "$site" "$device" provisioned "$rev"
    echo "${0##*/}: $site/$device: register entry published, $(wc -l <"$owned/$device") spot(s)" >&2
}

# rev_now: the register's order: the broker host's clock in milliseconds, and always past the last one given (kept in
# register.rev under the register's lock), so a clock set back on this host cannot make a newer entry lose at the bridge.
rev_now() {
    local now last
    now=$(date +%s%3N)
    last=$(cat "$register.rev" 2>/dev/null || echo 0)
    [[ $last =~ ^[0-9]+$ ]] || last=0
    ((now > last)) || now=$((last + 1))
    echo "$now" >"$register.rev"
    echo "$now"
}

# clear_retained SITE DEVICE: every retained message of the device's tree removed (its status, spot and level states),
# as the admin role; mosquitto_sub ends 2 s after the last one (exit 27: its timeout, the normal end here).
clear_retained() {
    local conf rc=0
    conf=$(mktemp -d)
    cp "$admin" "$conf/mosquitto_sub"
    XDG_CONFIG_HOME=$conf mosquitto_sub -h 127.0.0.1 -p "${PARKWISE_ADMIN_PORT:-1883}" -i "parkwise-admin-$$" \
        -t "parkwise/v1/$1/$2/#" --remove-retained --retained-only -W 2 >/dev/null 2>"$conf/err" || rc=$?
    [ $rc = 0 ] || [ $rc = 27 ] || echo "${0##*/}: its retained topics were not cleared ($(cat "$conf/err")):" \
        "the bridge ignores them anyway; a monitor may show the board until they are" >&2
    rm -rf "$conf"
}
