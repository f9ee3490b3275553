#!/usr/bin/env bash
# Makes a test/installer PKI with openssl: a CA, a server certificate for the broker and one client
# certificate per name given (CN = the name = the device id, or the backend's user name).
#
#   deploy/mosquitto/make-certs.sh OUTDIR [CLIENT...]
#   SERVER_NAMES="mqtt.garage.lan,10.20.0.5" deploy/mosquitto/make-certs.sh /etc/mosquitto/parkwise/certs p2-east
#
# Writes OUTDIR/ca.crt ca.key server.crt server.key, CLIENT.crt CLIENT.key, and crl.pem (the CA's revocation list,
# empty at first, which mosquitto's crlfile needs; crl.sh, revoke.sh). The server certificate
# names localhost and 127.0.0.1 plus every SERVER_NAMES entry (DNS names or IP addresses). An existing
# CA in OUTDIR is reused, so running it again only adds clients. The keys it makes are mode 0600; files already
# there keep their modes.
# Validity: DAYS (default 825). For production, keep ca.key off the broker.
set -euo pipefail
# shellcheck source=deploy/mosquitto/crl.sh
source "$(dirname "$0")/crl.sh"

if [ $# -lt 1 ]; then
    echo "usage: $0 OUTDIR [CLIENT...]" >&2
    exit 64
fi
out=$1
shift
days=${DAYS:-825}
mkdir -p "$out"
umask 077

valid_name() { [[ $1 =~ ^[A-Za-z0-9._-]+$ ]]; }

if [ ! -s "$out/ca.key" ] || [ ! -s "$out/ca.crt" ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$days" \
        -keyout "$out/ca.key" -out "$out/ca.crt" -subj "/O=ParkWise/CN=ParkWise test CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    chmod 600 "$out/ca.key"
    chmod 644 "$out/ca.crt"
fi

# sign NAME EXTFILE: NAME.key + NAME.crt signed by the CA.
sign() {
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$out/$1.key" -out "$out/$1.csr" \
        -subj "/O=ParkWise/CN=$1" 2>/dev/null
    openssl x509 -req -sha256 -days "$days" -in "$out/$1.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" \
        -CAcreateserial -out "$out/$1.crt" -extfile "$2" 2>/dev/null
    rm -f "$out/$1.csr"
    chmod 600 "$out/$1.key"
    chmod 644 "$out/$1.crt"
}

[ -s "$out/crl.pem" ] || crl_issue "$out"

ext=$(mktemp)
trap 'rm -f "$ext"' EXIT

if [ ! -s "$out/server.crt" ]; then
    san="DNS:localhost,IP:127.0.0.1"
    IFS=, read -r -a extra <<< "${SERVER_NAMES:-}"
    for n in "${extra[@]}"; do
        [ -n "$n" ] || continue
        if [[ $n =~ ^[0-9.]+$ || $n == *:* ]]; then san="$san,IP:$n"; else san="$san,DNS:$n"; fi
    done
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
        "extendedKeyUsage=serverAuth" "subjectAltName=$san" > "$ext"
    sign server "$ext"
fi

printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=clientAuth" > "$ext"
for name in "$@"; do
    if ! valid_name "$name" || [ "$name" = server ] || [ "$name" = ca ]; then
        echo "make-certs: '$name' is not a usable client name (letters, digits, - _ .; not 'server' or 'ca')" >&2
        exit 64
    fi
    sign "$name" "$ext"
done

# Only what this run made: the modes given to existing files stay (the broker reads server.key through its group,
# README.md "Install"; a provision that made it 0600 again left mosquitto, which reads it at a reload as its own user,
# without its key: every TLS handshake failed).
echo "make-certs: $out: ca.crt server.crt${*:+ $(printf '%s.crt ' "$@")}" >&2
