# Sourced by make-certs.sh, provision.sh, reissue.sh and revoke.sh: the CA's revocation list, certs/crl.pem, which mosquitto's
# mutual TLS listener checks (crlfile) at every TLS handshake and reads again on SIGHUP. Kept with `openssl ca`'s
# database in certs/ca-db/ (index.txt: the revoked certificates; crlnumber). Issued for CRL_DAYS (default 825, as the
# certificates): every provision and revoke issues it anew; a CRL past its date makes OpenSSL refuse EVERY client
# certificate, so on a site where nothing changes for that long, run `deploy/mosquitto/revoke.sh --renew-crl`.
# shellcheck shell=bash

# crl_config CERTS: prints the path of an `openssl ca` config for the CA in CERTS (made if missing).
crl_config() {
    local db=$1/ca-db
    if [ ! -e "$db/openssl-ca.cnf" ]; then
        mkdir -p "$db"
        : >"$db/index.txt"
        echo 01 >"$db/crlnumber"
        printf '%s\n' "[ ca ]" "default_ca = parkwise" "[ parkwise ]" "database = $db/index.txt" \
            "crlnumber = $db/crlnumber" "default_md = sha256" "default_crl_days = ${CRL_DAYS:-825}" \
            >"$db/openssl-ca.cnf"
    fi
    echo "$db/openssl-ca.cnf"
}

# crl_issue CERTS: signs CERTS/crl.pem anew (every revocation in the database, a fresh next-update date).
crl_issue() {
    local config
    config=$(crl_config "$1")
    openssl ca -batch -config "$config" -gencrl -keyfile "$1/ca.key" -cert "$1/ca.crt" -out "$1/crl.pem.new" 2>"$1/ca-db/last.err" ||
        { cat "$1/ca-db/last.err" >&2; echo "${0##*/}: cannot sign the revocation list with $1/ca.key" >&2; return 1; }
    chmod 0644 "$1/crl.pem.new"
    mv "$1/crl.pem.new" "$1/crl.pem"
}

# crl_revoke CERTS CERTFILE: adds the certificate to the database (it stays valid nowhere) and issues the CRL.
crl_revoke() {
    local config
    config=$(crl_config "$1")
    openssl ca -batch -config "$config" -revoke "$2" -keyfile "$1/ca.key" -cert "$1/ca.crt" 2>"$1/ca-db/last.err" ||
        { cat "$1/ca-db/last.err" >&2; echo "${0##*/}: cannot revoke $2 with the CA in $1" >&2; return 1; }
    crl_issue "$1"
}

# revoke_certificates CERTS DEVICE: every certificate of DEVICE not revoked yet, its current CERTS/DEVICE.crt and those
# a reissue kept in CERTS/issued/ (bundle.sh), goes into the CRL (an expired one needs not); false if none is on file.
revoke_certificates() {
    local cert found=1
    for cert in "$1/$2.crt" "$1/issued/$2".*.crt; do
        [ -e "$cert" ] || continue
        found=0
        openssl verify -CAfile "$1/ca.crt" -CRLfile "$1/crl.pem" -crl_check "$cert" >/dev/null 2>&1 || continue
        crl_revoke "$1" "$cert"
    done
    return $found
}
