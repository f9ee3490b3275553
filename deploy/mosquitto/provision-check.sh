#!/usr/bin/env bash
# Tests provision.sh and revoke.sh against a real mosquitto with this directory's mosquitto.conf and acl.conf (only
# ports and paths changed), TLS and ACLs, on free loopback ports, started here and ended by PID (run by
# deploy/dev/test.sh). Two boards are provisioned; p2-east publishes in its tree with its bundle's certificate and with
# its password, the real agent publishes a replayed trace with the bundle's files as they are, p2-east cannot write
# p3-west's tree (the backend's subscriber gets nothing of it); after `revoke.sh` it cannot log in by certificate or
# password, its connection from before may write nothing, p3-west still works, and its id cannot be provisioned again.
#   deploy/mosquitto/provision-check.sh      (PARKWISE_AGENT_BIN: default .build/debug/parkwise-agent)
set -euo pipefail
cd "$(dirname "$0")/../.."
agent=${PARKWISE_AGENT_BIN:-.build/debug/parkwise-agent}
[ -x "$agent" ] || { echo "provision-check: no agent at $agent: swift build --product parkwise-agent first" >&2; exit 1; }
work=$(mktemp -d /tmp/parkwise-provision.XXXXXX)
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
fail() {
    echo "provision-check: FAIL: $*" >&2
    echo "--- broker log (last 40 lines)" >&2
    tail -n 40 "$work/broker/mosquitto.log" >&2 || true
    exit 1
}
# eventually SECONDS COMMAND...: true once COMMAND succeeds, false if it never does within SECONDS.
eventually() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}
free_ports() {
    python3 -c 'import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))'
}

# The broker: the shipped files, a password for the backend, ports and paths changed.
broker=$work/broker
mkdir -p "$broker" "$work/out"
bash deploy/mosquitto/make-certs.sh "$broker/certs" 2>/dev/null
chmod 0640 "$broker/certs/server.key"   # as README.md "Install" has it: mosquitto's group reads it
install -m 0600 /dev/null "$broker/passwd"
backend_pw=$(openssl rand -hex 12)
mosquitto_passwd -b "$broker/passwd" parkwise-backend "$backend_pw"
cp deploy/mosquitto/acl.conf "$broker/acl.conf"
read -r plain tls mutual <<<"$(free_ports)"
sed -e "s|/etc/mosquitto/parkwise/|$broker/|" -e "s|^listener 1883 127.0.0.1$|listener $plain 127.0.0.1|" \
    -e "s|^listener 8883$|listener $tls 127.0.0.1|" -e "s|^listener 8884$|listener $mutual 127.0.0.1|" \
    deploy/mosquitto/mosquitto.conf >"$broker/mosquitto.conf"
for port in "$plain" "$tls" "$mutual"; do grep -q "^listener $port 127.0.0.1$" "$broker/mosquitto.conf" ||
    fail "deploy/mosquitto/mosquitto.conf has no listener 1883/8883/8884 line to move to a free port"; done
printf '%s\n' "user root" "persistence false" "log_dest file $broker/mosquitto.log" "log_type all" >>"$broker/mosquitto.conf"
mosquitto -c "$broker/mosquitto.conf" >"$work/mosquitto.out" 2>&1 &
mosquitto_pid=$!
pids+=("$mosquitto_pid")
eventually 10 grep -q "Opening ipv4 listen socket on port $mutual" "$broker/mosquitto.log" ||
    { cat "$work/mosquitto.out" >&2; fail "mosquitto did not open its listeners"; }
export PARKWISE_BROKER_DIR=$broker PARKWISE_MOSQUITTO_PID=$mosquitto_pid PARKWISE_BUNDLE_DIR=$work/out
export PARKWISE_BROKER_URL=mqtts://localhost:$mutual PARKWISE_ADMIN_PORT=$plain

# The backend's view: everything under parkwise/v1/.
mosquitto_sub -h 127.0.0.1 -p "$plain" -u parkwise-backend -P "$backend_pw" -i backend-view -t 'parkwise/v1/#' -v \
    >"$work/seen" 2>"$work/sub.err" &
pids+=($!)
eventually 10 grep -q "backend-view 0 parkwise/v1/#" "$broker/mosquitto.log" || fail "the backend's subscriber"

reloads() { grep -c "Reloading config" "$broker/mosquitto.log" || true; }
reloaded() { [ "$(reloads)" -ge "$1" ]; }   # reloaded N: the broker has reloaded N times
started=$(date +%s%N)
bash deploy/mosquitto/provision.sh uniandes p2-east >"$work/install-line" 2>"$work/provision.log" ||
    { cat "$work/provision.log" >&2; fail "provision uniandes p2-east"; }
echo "provision-check: provision.sh took $(( ($(date +%s%N) - started) / 1000000 )) ms" >&2
# p3-west with its spots, as `parkwise-bridge export-config --level P3 --zone A --output` writes them (levels and spots
# only; each input UNSET), and its board named.
cat >"$work/p3-a.yaml" <<'SPOTS'
# From ParkWise's levels and spots tables by parkwise-bridge export-config --level P3 --zone A, 2026-12-03T08:00:00Z.
levels:
  - { id: "P3", capacity: 48 }   # 48 spots in the backend (this file: zone A, 2 of them)
spots:
  - { id: "P3-A-01", input: UNSET }   # A01
  - { id: "P3-A-02", input: UNSET }   # A02 EV
SPOTS
sed '1a site: "elsewhere"' "$work/p3-a.yaml" >"$work/whole.yaml"
if bash deploy/mosquitto/provision.sh uniandes p3-west "$work/whole.yaml" >/dev/null 2>"$work/refused"; then
    fail "a whole config as SPOTS was accepted"
fi
grep -q "has its own 'site:' (a whole config): export it without --site and --device" "$work/refused" ||
    { cat "$work/refused" >&2; fail "the refusal of a whole config as SPOTS does not say why"; }
{ [ ! -e "$work/out/uniandes-p3-west.tar" ] && ! grep -q "^p3-west " "$broker/devices"; } || fail "a refused SPOTS still provisioned p3-west"
PARKWISE_BOARD=raspberry-pi-4 bash deploy/mosquitto/provision.sh uniandes p3-west "$work/p3-a.yaml" >/dev/null 2>"$work/p3.log" ||
    { cat "$work/p3.log" >&2; fail "provision uniandes p3-west with its spots"; }
grep -q "its config has the spots of $work/p3-a.yaml; then walk-test --learn and doctor" "$work/p3.log" ||
    { cat "$work/p3.log" >&2; fail "provision with SPOTS does not say what comes next"; }
eventually 10 reloaded 2 || fail "the broker was not reloaded (SIGHUP) by provision.sh"
# mosquitto (its own user on a real host) reads the server's key again at a reload: provisioning leaves its mode alone.
[ "$(stat -c %a "$broker/certs/server.key")" = 640 ] || fail "provision.sh changed server.key's mode to $(stat -c %a "$broker/certs/server.key")"
grep -qx "  sudo tar -xpf uniandes-p2-east.tar -C /" "$work/install-line" || { cat "$work/install-line" >&2; fail "provision.sh's install line"; }
# The site's register: each board's entry, retained, with the spots of its SPOTS (p2-east: none yet).
reg=parkwise/v1/uniandes/_register
entry() { grep "^$reg/$1 " "$work/seen" | tail -n 1; }   # entry DEVICE: the last one the backend's view got
eventually 10 grep -q "^$reg/p3-west .*\"spots\":\[\"P3-A-01\",\"P3-A-02\"\],\"state\":\"provisioned\"}" "$work/seen" ||
    fail "p3-west's register entry with its two spots never came: $(entry p3-west)"
eventually 10 grep -q "^$reg/p2-east .*\"spots\":\[\],\"state\":\"provisioned\"}" "$work/seen" ||
    fail "p2-east's register entry never came: $(entry p2-east)"
[ "$(stat -c %a "$broker/admin")" = 600 ] || fail "the admin role's login is not mode 0600"

# An id never collides: taken (at any site), not a topic part, or the broker's own.
for args in "uniandes p2-east" "othersite p2-east" "uniandes p2/east" "uniandes parkwise-backend"; do
    # shellcheck disable=SC2086
    if bash deploy/mosquitto/provision.sh $args >/dev/null 2>"$work/refused"; then fail "provision $args was not refused"; fi
done
grep -q "device id p2-east is taken (p2-east uniandes provisioned" <<<"$(bash deploy/mosquitto/provision.sh uniandes p2-east 2>&1)" ||
    fail "a taken id's refusal does not say so"

# whole_bundle DEVICE: its bundle holds the board's files with the owners and modes the service needs (tar lists them by
# name), and is itself mode 0600 (secrets).
whole_bundle() {
    local bundle=$work/out/uniandes-$1.tar listing want
    [ "$(stat -c %a "$bundle")" = 600 ] || fail "the bundle $bundle (secrets) is not mode 0600"
    listing=$(tar -tvf "$bundle")
    for want in "-rw------- parkwise/parkwise .* etc/parkwise-agent/credentials" \
        "-rw------- parkwise/parkwise .* etc/parkwise-agent/$1.key" \
        "-rw-r----- root/parkwise .* etc/parkwise-agent/agent.yaml" \
        "-rw-r--r-- root/root .* etc/parkwise-agent/ca.crt" "-rw-r--r-- root/root .* etc/parkwise-agent/$1.crt"; do
        grep -q -- "^$want\$" <<<"$listing" || { echo "$listing" >&2; fail "$bundle entry: $want"; }
    done
}
whole_bundle p2-east
for board in p2-east p3-west; do
    mkdir -p "$work/$board"
    tar -xpf "$work/out/uniandes-$board.tar" -C "$work/$board"
done
# p3-west's config is whole but for its spots' inputs: check-config names each one (and nothing else).
p3_config=$work/p3-west.yaml
sed "s|/etc/parkwise-agent/|$work/p3-west/etc/parkwise-agent/|g" "$work/p3-west/etc/parkwise-agent/agent.yaml" >"$p3_config"
grep -qx "board: raspberry-pi-4" "$p3_config" || fail "PARKWISE_BOARD did not name the board in the config"
if "$agent" check-config "$p3_config" >"$work/check" 2>&1; then fail "check-config passed spots whose inputs are UNSET"; fi
{ [ "$(grep -c ': error: ' "$work/check")" = 2 ] && grep -q "error: spot P3-A-01: input not set" "$work/check" &&
    grep -q "error: spot P3-A-02: input not set" "$work/check"; } ||
    { cat "$work/check" >&2; fail "check-config of p3-west's bundle: not exactly its two UNSET inputs"; }
files=$work/p2-east/etc/parkwise-agent
password=$(sed -n 's/^password=//p' "$files/credentials")
p3_password=$(sed -n 's/^password=//p' "$work/p3-west/etc/parkwise-agent/credentials")
as_cert=(-h localhost -p "$mutual" --cafile "$files/ca.crt" --cert "$files/p2-east.crt" --key "$files/p2-east.key")
as_password=(-h localhost -p "$tls" --cafile "$files/ca.crt" -u p2-east -P "$password")
p3=(-h 127.0.0.1 -p "$plain" -u p3-west -P "$p3_password")
# publish LOGIN... TOPIC MESSAGE: one QoS 1 message with MQTT 5 (a refusal comes back in the PUBACK).
# (mosquitto_pub 2.0.11 exits 0 after "Warning: Publish 1 failed: Not authorized.": its stderr says it.)
publish() {
    local err
    err=$(mosquitto_pub "${@:1:$#-2}" -V mqttv5 -q 1 -t "${*:$#-1:1}" -m "${*:$#}" 2>&1) || { echo "$err" >&2; return 1; }
    [ -z "$err" ] || { echo "$err" >&2; return 1; }
}
seen() { grep -qxF "$1" "$work/seen"; }

a=parkwise/v1/uniandes/p2-east b=parkwise/v1/uniandes/p3-west
eventually 10 publish "${as_cert[@]}" "$a/events" own-by-certificate || fail "p2-east cannot publish with its certificate"
publish "${as_password[@]}" "$a/status" own-by-password || fail "p2-east cannot publish with its password"
if publish "${as_cert[@]}" "$b/events" intrusion 2>"$work/denied"; then fail "p2-east wrote p3-west's events"; fi
grep -q "Not authorized" "$work/denied" || { cat "$work/denied" >&2; fail "p2-east's intrusion was refused, but not by the ACL"; }
if publish "${as_cert[@]}" "$a/cmd/rebirth" self-command 2>/dev/null; then fail "p2-east wrote a command to itself"; fi
publish "${p3[@]}" "$b/events" p3-own || fail "p3-west cannot publish in its tree"
eventually 10 seen "$b/events p3-own" || fail "the backend never got p3-west's message"
for line in "$a/events own-by-certificate" "$a/status own-by-password"; do seen "$line" || fail "the backend never got: $line"; done
# Nobody but the admin role writes the register: not a board (for itself or another), not the backend.
for login in "${as_cert[*]}" "${p3[*]}"; do
    # shellcheck disable=SC2086
    if publish $login "$reg/p2-east" forged 2>"$work/denied"; then fail "a board wrote the site's register ($login)"; fi
    grep -q "Not authorized" "$work/denied" || { cat "$work/denied" >&2; fail "a forged register entry was refused, but not by the ACL"; }
done
if publish -h 127.0.0.1 -p "$plain" -u parkwise-backend -P "$backend_pw" "$reg/p3-west" forged 2>/dev/null; then
    fail "the backend's login wrote the site's register"
fi
if grep -q "intrusion\|self-command\|forged" "$work/seen"; then fail "a refused message reached the backend: $(cat "$work/seen")"; fi

# Moving a spot is one command: P3-A-02 (its sensor rewired to p2-east) leaves p3-west's entry, joins p2-east's, one rev.
bash deploy/mosquitto/spots.sh uniandes p2-east P3-A-02 2>"$work/spots.log" || { cat "$work/spots.log" >&2; fail "spots.sh"; }
eventually 10 grep -q "^$reg/p2-east .*\"spots\":\[\"P3-A-02\"\]" "$work/seen" || fail "p2-east's entry after the move: $(entry p2-east)"
eventually 10 grep -q "^$reg/p3-west .*\"spots\":\[\"P3-A-01\"\]" "$work/seen" || fail "p3-west's entry after the move: $(entry p3-west)"
[ "$(entry p2-east | sed 's/.*"rev":\([0-9]*\).*/\1/')" = "$(entry p3-west | sed 's/.*"rev":\([0-9]*\).*/\1/')" ] ||
    fail "the two entries of one move have different revs: $(entry p2-east) / $(entry p3-west)"
if bash deploy/mosquitto/spots.sh uniandes p9-none P3-A-01 2>/dev/null; then fail "spots.sh gave spots to a device never provisioned"; fi
# The register's order survives a clock set back on the broker host: the next rev is past the last one given.
before_rev=$(cat "$broker/devices.rev")
echo $((before_rev + 3600000)) >"$broker/devices.rev"   # as if the last entry had been given an hour ahead of this clock
bash deploy/mosquitto/spots.sh uniandes p2-east --publish 2>"$work/spots.log" || { cat "$work/spots.log" >&2; fail "spots.sh --publish"; }
eventually 10 grep -q "^$reg/p2-east .*\"rev\":$((before_rev + 3600001))," "$work/seen" ||
    fail "the rev after a clock set back is not past the last one: $(entry p2-east)"

# The real agent with the bundle's files as they are (config skeleton + the single gate's level and lane).
config=$work/p2-east.yaml
sed "s|/etc/parkwise-agent/|$files/|g" "$files/agent.yaml" >"$config"
sed -n '/^levels:/,$p' hardware/examples/single-gate.yaml >>"$config"
"$agent" check-config "$config" >"$work/check" 2>&1 || { cat "$work/check" >&2; fail "check-config of the bundle's config"; }
cat >"$work/trace.jsonl" <<'TRACE'
{"parkwise_trace": 1, "site": "uniandes", "device": "p2-east", "note": "one car in"}
{"t_ms": 0, "input": "GPIO17", "value": 1}
{"t_ms": 700, "input": "GPIO27", "value": 1}
{"t_ms": 1400, "input": "GPIO17", "value": 0}
{"t_ms": 2100, "input": "GPIO27", "value": 0}
TRACE
"$agent" run --config "$config" --replay "$work/trace.jsonl" --outbox "$work/outbox" 2>"$work/agent.log" &
agent_pid=$!
pids+=("$agent_pid")
eventually 60 grep -q "^$a/events .*\"lane.passage\"" "$work/seen" ||
    { cat "$work/agent.log" >&2; fail "the agent's lane.passage never reached the backend"; }
kill -TERM "$agent_pid"
wait "$agent_pid" || { cat "$work/agent.log" >&2; fail "the agent did not stop cleanly"; }

# A connection p2-east holds across the revocation (by certificate: mosquitto does not check the CRL again on it).
mkfifo "$work/held"
mosquitto_pub "${as_cert[@]}" -i held-p2-east -q 1 -t "$a/events" -l <"$work/held" 2>"$work/held.err" &
pids+=($!)
exec 8>"$work/held"
echo before-revoke >&8
eventually 10 seen "$a/events before-revoke" || fail "the held connection's message before the revocation"

before=$(reloads)
started=$(date +%s%N)
bash deploy/mosquitto/revoke.sh uniandes p2-east 2>"$work/revoke.log" || { cat "$work/revoke.log" >&2; fail "revoke"; }
echo "provision-check: revoke.sh took $(( ($(date +%s%N) - started) / 1000000 )) ms" >&2
eventually 10 reloaded $((before + 1)) || fail "the broker was not reloaded by revoke.sh"
# refused WORDS LOGIN...: the login fails at connecting (not a denied publish), and mosquitto_pub says WORDS.
refused() {
    local err
    if err=$(publish "${@:2}" "$a/events" after-revoke 2>&1); then return 1; fi
    ! grep -q "Publish .* failed" <<<"$err" && grep -q "$1" <<<"$err"
}
# (How mosquitto_pub words it depends on when the server's TLS alert reaches it: during the handshake, "Protocol
# error"/TLS; after it, as with TLS 1.3's client certificates, "The connection was lost". The broker's log below says
# which refused it.)
eventually 10 refused "Error: Protocol error\|TLS\|Error: The connection was lost" "${as_cert[@]}" ||
    fail "p2-east still connects with its revoked certificate: $(publish "${as_cert[@]}" "$a/events" x 2>&1)"
grep -q "certificate revoked\|certificate verify failed" "$broker/mosquitto.log" || fail "the broker's log has no refused certificate"
eventually 10 refused "Connection error: Not authorized" "${as_password[@]}" ||
    fail "p2-east still logs in with its removed password: $(publish "${as_password[@]}" "$a/events" x 2>&1)"
echo held-after-revoke >&8
eventually 10 grep -q "Denied PUBLISH from held-p2-east" "$broker/mosquitto.log" ||
    fail "the connection made before the revocation was not denied"
exec 8>&-
publish "${p3[@]}" "$b/events" p3-after || fail "p3-west cannot publish after p2-east's revocation"
eventually 10 seen "$b/events p3-after" || fail "the backend never got p3-west's message after the revocation"
if grep -q "after-revoke" "$work/seen"; then fail "a revoked board's message reached the backend"; fi
# The bridge learns the revocation from the register; the board's retained status and states are gone from the broker.
eventually 10 grep -q "^$reg/p2-east .*\"spots\":\[\],\"state\":\"revoked\"}" "$work/seen" ||
    fail "p2-east's revoked entry never came: $(entry p2-east)"
left=$(mosquitto_sub -h 127.0.0.1 -p "$plain" -u parkwise-backend -P "$backend_pw" -t "$a/#" --retained-only -W 2 -v 2>/dev/null || true)
[ -z "$left" ] || fail "the revoked board's retained topics are still on the broker: $left"
if bash deploy/mosquitto/spots.sh uniandes p2-east P3-A-02 2>/dev/null; then fail "spots.sh gave spots to a revoked device"; fi
if bash deploy/mosquitto/provision.sh uniandes p2-east >/dev/null 2>&1; then fail "a revoked id was provisioned again"; fi
grep -q "is revoked already" <<<"$(bash deploy/mosquitto/revoke.sh uniandes p2-east 2>&1)" || fail "a second revoke"

# Renewal, one command: a new certificate for p3-west, the old one still valid (the board uses it until it has the new).
p3_files=$work/p3-west/etc/parkwise-agent
as_p3_cert() { echo -h localhost -p "$mutual" --cafile "$p3_files/ca.crt" --cert "$1/p3-west.crt" --key "$1/p3-west.key"; }
mkdir -p "$work/p3-first" "$work/p3-renewed" "$work/p3-reissued"
cp "$p3_files/p3-west.crt" "$p3_files/p3-west.key" "$work/p3-first/"
started=$(date +%s%N)
bash deploy/mosquitto/reissue.sh uniandes p3-west --certificate >"$work/install-line" 2>"$work/renew.log" ||
    { cat "$work/renew.log" >&2; fail "reissue.sh --certificate"; }
echo "provision-check: reissue.sh --certificate took $(( ($(date +%s%N) - started) / 1000000 )) ms" >&2
grep -qx "  sudo tar -xpf uniandes-p3-west-certificate.tar -C / && sudo systemctl restart parkwise-agent" "$work/install-line" ||
    { cat "$work/install-line" "$work/renew.log" >&2; fail "reissue.sh --certificate's install line"; }
renewal=$work/out/uniandes-p3-west-certificate.tar
[ "$(stat -c %a "$renewal")" = 600 ] || fail "the renewal bundle (a key) is not mode 0600"
listing=$(tar -tvf "$renewal")
{ [ "$(wc -l <<<"$listing")" = 2 ] && grep -q -- "^-rw------- parkwise/parkwise .* etc/parkwise-agent/p3-west.key$" <<<"$listing" &&
    grep -q -- "^-rw-r--r-- root/root .* etc/parkwise-agent/p3-west.crt$" <<<"$listing"; } ||
    { echo "$listing" >&2; fail "the renewal bundle is not exactly the new key and certificate"; }
tar -xpf "$renewal" -C "$work/p3-renewed" --strip-components=2
serial() { openssl x509 -in "$1/p3-west.crt" -noout -serial; }
[ "$(serial "$work/p3-first")" != "$(serial "$work/p3-renewed")" ] || fail "the renewed certificate is the old one"
[ "$(openssl x509 -in "$work/p3-renewed/p3-west.crt" -noout -subject)" = "$(openssl x509 -in "$work/p3-first/p3-west.crt" -noout -subject)" ] ||
    fail "the renewed certificate names another subject"
# shellcheck disable=SC2046
eventually 10 publish $(as_p3_cert "$work/p3-renewed") "$b/events" renewed || fail "p3-west cannot publish with its renewed certificate"
# shellcheck disable=SC2046
publish $(as_p3_cert "$work/p3-first") "$b/events" first-still || fail "the renewal revoked p3-west's certificate in use"
publish "${p3[@]}" "$b/events" password-still || fail "the renewal changed p3-west's password"

# A lost bundle, one command: every old certificate revoked, a new password, the same id, spots and ACL.
started=$(date +%s%N)
bash deploy/mosquitto/reissue.sh uniandes p3-west >"$work/install-line" 2>"$work/reissue.log" ||
    { cat "$work/reissue.log" >&2; fail "reissue.sh"; }
echo "provision-check: reissue.sh took $(( ($(date +%s%N) - started) / 1000000 )) ms" >&2
grep -qx "  sudo tar -xpf uniandes-p3-west.tar -C /" "$work/install-line" || { cat "$work/install-line" >&2; fail "reissue.sh's install line"; }
whole_bundle p3-west
tar -xpf "$work/out/uniandes-p3-west.tar" -C "$work/p3-reissued" --strip-components=2
grep -qx "device: p3-west" "$work/p3-reissued/agent.yaml" || fail "the reissued config is not p3-west's"
new_password=$(sed -n 's/^password=//p' "$work/p3-reissued/credentials")
[ "$new_password" != "$p3_password" ] || fail "the reissue kept the lost password"
# shellcheck disable=SC2046
eventually 10 publish $(as_p3_cert "$work/p3-reissued") "$b/events" reissued || fail "p3-west cannot publish with its reissued certificate"
publish -h 127.0.0.1 -p "$plain" -u p3-west -P "$new_password" "$b/events" new-password || fail "p3-west's new password"
eventually 10 seen "$b/events new-password" || fail "the backend never got p3-west's message with its new password"
for old in p3-first p3-renewed; do
    # shellcheck disable=SC2046
    refused "Error: Protocol error\|TLS\|Error: The connection was lost" $(as_p3_cert "$work/$old") ||
        fail "p3-west's lost certificate ($old) still connects"
done
refused "Connection error: Not authorized" "${p3[@]}" || fail "p3-west's lost password still logs in"
grep -q "^p3-west uniandes provisioned" "$broker/devices" || fail "the reissue changed p3-west's register line: $(grep p3-west "$broker/devices")"
current=$(mosquitto_sub -h 127.0.0.1 -p "$plain" -u parkwise-backend -P "$backend_pw" -t "$reg/p3-west" --retained-only -W 2 2>/dev/null || true)
grep -q '"spots":\["P3-A-01"\],"state":"provisioned"' <<<"$current" || fail "p3-west's register entry after the reissue: $current"
for args in "uniandes p2-east" "uniandes p9-none --certificate" "othersite p3-west"; do
    # shellcheck disable=SC2086
    if bash deploy/mosquitto/reissue.sh $args >/dev/null 2>&1; then fail "reissue.sh $args was not refused"; fi
done
echo "provision-check: ok" >&2
