#!/usr/bin/env bash
# The signed apt repository as a board uses it (run by ci-arm64.sh, as root): make-repo.sh builds it from the .debs
# given, signed with a throwaway key (a temporary GNUPGHOME); in the Debian root install-cycle.sh caches (amd64,
# bookworm) the board's one file — the repository's parkwise-bookworm.sources, its key inline — points apt at it,
# served by python3's http.server on 127.0.0.1 (free port); apt installs the agent; the repository gets the next
# version (the same package with a higher version) and unattended-upgrade, with apt/52parkwise-unattended-upgrades,
# upgrades it; then a repository signed by another key, a changed Packages index and a changed .deb are refused by
# apt with its own errors. Prints the times (repository build, upgrade).
#   deploy/package/repo-check.sh DEB...       (the amd64 bookworm one is installed; all go into the repository)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=deploy/package/cross-env.sh
source deploy/package/cross-env.sh
[ $# -ge 1 ] || { echo "usage: $0 DEB... (one of them the amd64 bookworm package)" >&2; exit 64; }
deb=
for d in "$@"; do case ${d##*/} in parkwise-agent_*+deb12_amd64.deb) deb=$d ;; esac; done
[ -n "$deb" ] || { echo "repo-check: no parkwise-agent_*+deb12_amd64.deb among $*: build one with deploy/package/make-deb.sh" >&2; exit 64; }
work=$(mktemp -d /tmp/parkwise-repo.XXXXXX)
server=
cleanup() {
    [ -z "$server" ] || kill "$server" 2>/dev/null || true
    [ ! -d "$work/gnupg" ] || gpgconf --homedir "$work/gnupg" --kill gpg-agent 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "repo-check: FAIL: $*" >&2; exit 1; }
log=$work/log
: >"$log"
install_missing apt-utils gpg xz-utils debootstrap python3
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# Two throwaway keys: the repository's, and one the board does not trust.
export GNUPGHOME=$work/gnupg
mkdir -m 0700 "$GNUPGHOME"
for name in repository stranger; do
    gpg --batch --pinentry-mode loopback --passphrase '' --quick-gen-key "ParkWise CI $name <ci-$name@parkwise.invalid>" ed25519 sign 1d 2>>"$log"
done
fingerprint() { gpg --batch --with-colons --list-secret-keys "$1" | awk -F: '$1 == "fpr" { print $10; exit }'; }
key=$(fingerprint ci-repository@parkwise.invalid) stranger=$(fingerprint ci-stranger@parkwise.invalid)

repo=$work/repo
started=$(date +%s%N)
PARKWISE_REPO_KEY=$key bash deploy/package/make-repo.sh "$repo" "$@" 2>>"$log" || { cat "$log" >&2; fail "make-repo.sh"; }
echo "repo-check: repository of $# packages built and signed in $(ms "$started") ms" >&2
for suite in bookworm trixie; do
    gpgv --keyring "$repo/parkwise-archive-keyring.pgp" "$repo/dists/$suite/InRelease" 2>>"$log" ||
        fail "gpgv does not accept dists/$suite/InRelease with the repository's keyring"
done
# Every package in its suite (+deb12: bookworm, +deb13: trixie) and architecture, and nowhere else.
for d in "$@"; do
    case $(dpkg-deb -f "$d" Version) in *+deb12*) suite=bookworm ;; *) suite=trixie ;; esac
    arch=$(dpkg-deb -f "$d" Architecture)
    in=$(grep -l "^Filename: pool/main/p/[^/]*/${d##*/}$" "$repo"/dists/*/main/binary-*/Packages || true)
    [ "$in" = "$repo/dists/$suite/main/binary-$arch/Packages" ] || fail "${d##*/} is in [$in], not in $suite/$arch alone"
done

# The next version: the same package, version X+deb12 -> X.1+deb12 (a bug-fix release as apt sees it).
dpkg-deb -R "$deb" "$work/next"
version=$(dpkg-deb -f "$deb" Version)
next=${version%%+deb12*}.1+deb12${version#*+deb12}
sed -i "s/^Version: .*/Version: $next/" "$work/next/DEBIAN/control"
dpkg-deb --root-owner-group --build "$work/next" "$work/parkwise-agent_${next}_amd64.deb" >/dev/null
dpkg --compare-versions "$next" gt "$version" || fail "$next is not above $version"

# The Debian root (cached by install-cycle.sh) with unattended-upgrades and what the agent depends on from Debian (a
# board has Debian's archive), their .debs cached by exact version beside it; then Debian's own sources are removed:
# only the ParkWise repository (on loopback) is left.
root=$work/root
mkdir -p "$root"
tar -C "$root" -xf "$(debian_root amd64 bookworm)"
archives=$CROSS_CACHE/apt-archives-bookworm-amd64
mkdir -p "$archives"
cp "$archives"/*.deb "$root/var/cache/apt/archives/" 2>/dev/null || true
in_root() { chroot_run "$root" "$@"; }
started=$(date +%s%N)
quiet in_root apt-get update -q
read -r -a from_debian <<<"$(dpkg-deb -f "$deb" Depends | sed 's/([^)]*)//g; s/[,|]/ /g')"
quiet in_root apt-get install -y -q --no-install-recommends unattended-upgrades "${from_debian[@]}"
cp -n "$root"/var/cache/apt/archives/*.deb "$archives/"
echo "repo-check: unattended-upgrades and the agent's dependencies installed in the root in $(ms "$started") ms" >&2
rm -f "$root/etc/apt/sources.list" "$root"/etc/apt/sources.list.d/*
find "$root/var/lib/apt/lists" -maxdepth 1 -type f -name '*_dists_*' -delete
in_root apt-get clean

python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$repo" >"$work/http.log" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q "port [0-9]" "$work/http.log" && break; sleep 0.1; done
port=$(sed -n 's/.* port \([0-9]*\) .*/\1/p' "$work/http.log")
[ -n "$port" ] || { cat "$work/http.log" >&2; fail "python3 -m http.server did not say its port within 10 s"; }

# The board's one file, the repository's own parkwise-bookworm.sources with its key inline, as the README says (only
# the URI differs: the server's port is known now), and the upgrade policy.
sed "s|^URIs: .*|URIs: http://127.0.0.1:$port/|" "$repo/parkwise-bookworm.sources" >"$root/etc/apt/sources.list.d/parkwise.sources"
grep -qx "URIs: http://127.0.0.1:$port/" "$root/etc/apt/sources.list.d/parkwise.sources" || fail "parkwise-bookworm.sources has no URIs: line"
grep -qx " -----BEGIN PGP PUBLIC KEY BLOCK-----" "$root/etc/apt/sources.list.d/parkwise.sources" || fail "parkwise-bookworm.sources has no key inline"
[ ! -e "$root/etc/apt/keyrings/parkwise-archive-keyring.pgp" ] || fail "the root has a keyring file: the inline key would not be what is tested"
install -m 0644 deploy/package/apt/52parkwise-unattended-upgrades "$root/etc/apt/apt.conf.d/"
quiet in_root apt-get update -q
quiet in_root apt-get install -y -q --no-install-recommends parkwise-agent
# shellcheck disable=SC2016  # (dpkg-query's format, not the shell's)
installed() { in_root dpkg-query -W -f='${Version}' parkwise-agent; }
[ "$(installed)" = "$version" ] || fail "apt installed $(installed), not $version"
quiet in_root apt-cache policy
grep -q "o=ParkWise,a=bookworm,n=bookworm,l=ParkWise,c=main" "$log.step" ||
    { cat "$log.step" >&2; fail "apt-cache policy shows no o=ParkWise,a=bookworm,n=bookworm,l=ParkWise,c=main"; }

# The next version, unattended.
PARKWISE_REPO_KEY=$key bash deploy/package/make-repo.sh "$repo" "$work/parkwise-agent_${next}_amd64.deb" 2>>"$log" ||
    { cat "$log" >&2; fail "make-repo.sh (next version)"; }
started=$(date +%s%N)
quiet in_root apt-get update -q
quiet in_root unattended-upgrade -v </dev/null
echo "repo-check: apt-get update + unattended-upgrade to $next in $(ms "$started") ms" >&2
[ "$(installed)" = "$next" ] || { cat "$log" >&2; fail "unattended-upgrade left $(installed), not $next"; }
grep -q "Packages that will be upgraded: parkwise-agent" "$log" || fail "unattended-upgrade's log does not name the agent"

# Tampered repositories, each with a fresh look (no lists kept from before): apt refuses every one.
good=$work/repo.good
cp -a "$repo" "$good"
forget_lists() { find "$root/var/lib/apt/lists" -maxdepth 1 -type f -name '127.0.0.1[:_]*' -delete; }
refused() {   # refused WHAT MESSAGE COMMAND...: the command fails and says MESSAGE; then the good repository is back
    in_root apt-get clean
    if in_root "${@:3}" >"$work/refused" 2>&1; then cat "$work/refused" >&2; fail "apt accepted $1"; fi
    grep -q "$2" "$work/refused" || { cat "$work/refused" >&2; fail "apt refused $1 without saying '$2'"; }
    rm -rf "$repo" && cp -a "$good" "$repo"
}
# Signed by a key the board does not trust.
PARKWISE_REPO_KEY=$stranger bash deploy/package/make-repo.sh "$repo" 2>>"$log" || fail "make-repo.sh (stranger's key)"
forget_lists
refused "a repository signed by another key" "NO_PUBKEY ${stranger: -16}" apt-get update -q
# A Packages index changed after signing, every compression of it (apt fetches Packages.xz: its size already tells).
dir=$repo/dists/bookworm/main/binary-amd64
cp "$dir/Packages" "$work/Packages.signed"
sed -i 's/^Description: ./Description: X/' "$dir/Packages"
! cmp -s "$dir/Packages" "$work/Packages.signed" || fail "the forged Packages is the signed one"
gzip -9n <"$dir/Packages" >"$dir/Packages.gz" && xz -9 <"$dir/Packages" >"$dir/Packages.xz"
forget_lists
refused "a changed Packages index" "Hash Sum mismatch\|File has unexpected size" apt-get update -q
# A .deb changed after signing, same size (one byte near its end).
quiet in_root apt-get update -q
pooled=$repo/pool/main/p/parkwise-agent/parkwise-agent_${next}_amd64.deb
printf 'X' | dd of="$pooled" bs=1 seek=$(($(stat -c %s "$pooled") - 100)) conv=notrunc status=none
refused "a changed .deb" "Hash Sum mismatch" apt-get install -y -q --reinstall parkwise-agent
[ "$(installed)" = "$next" ] || fail "after the refused .deb the agent is $(installed), not $next"
echo "repo-check: ok" >&2
