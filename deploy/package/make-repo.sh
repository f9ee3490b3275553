#!/usr/bin/env bash
# Builds (or adds to) the signed apt repository of the ParkWise packages, with Debian's apt-ftparchive and gpg
# (deploy/package/README.md, "The apt repository"):
#   PARKWISE_REPO_KEY=FINGERPRINT deploy/package/make-repo.sh REPO [DEB...]
# The .debs go to REPO/pool/main/<p>/<package>/ (a file there already must be the same bytes: a published version is
# never changed, give a new one a higher version); then every suite's indexes are written from the whole pool and
# signed with the key (a secret key in gpg's GNUPGHOME): suite = the Debian release the package was built for, from
# its version's +deb12 (bookworm: Raspberry Pi OS 12) or +deb13 (trixie: Raspberry Pi OS 13), component main,
# architectures arm64 and amd64. Release files say Origin: ParkWise, Label: ParkWise (what unattended-upgrades
# matches). REPO/parkwise-archive-keyring.pgp is the signing key; REPO/parkwise-SUITE.sources is a board's whole
# apt entry for a suite (deb822, the key inline in Signed-By, trusted for this repository only), so adding the
# repository on a board is one command: fetch that file into /etc/apt/sources.list.d/.
#   PARKWISE_REPO_URL   where boards reach REPO (default http://apt.garage.lan/parkwise/): the entries' URIs
set -euo pipefail
# shellcheck source=deploy/package/cross-env.sh
source "$(dirname "$0")/cross-env.sh"
[ $# -ge 1 ] || { echo "usage: PARKWISE_REPO_KEY=FINGERPRINT $0 REPO [DEB...]" >&2; exit 64; }
repo=$1
shift
url=${PARKWISE_REPO_URL:-http://apt.garage.lan/parkwise/}
[[ $url =~ ^(https?|file):[^[:space:]]+$ ]] ||
    { echo "make-repo: PARKWISE_REPO_URL '$url' is not an http://, https:// or file: URL" >&2; exit 64; }
key=${PARKWISE_REPO_KEY:-}
[ -n "$key" ] || { echo "make-repo: set PARKWISE_REPO_KEY to the fingerprint of the signing key (gpg --list-secret-keys)" >&2; exit 64; }
log=$(mktemp)
trap 'rm -f "$log" "$log.step"' EXIT
install_missing apt-utils gpg xz-utils
gpg --batch --list-secret-keys "$key" >/dev/null 2>&1 ||
    { echo "make-repo: no secret key $key in ${GNUPGHOME:-~/.gnupg}: import it, or set GNUPGHOME" >&2; exit 1; }
suites=(bookworm trixie)
arches=(arm64 amd64)

suite_of() {   # the suite of a package version: +deb12 -> bookworm, +deb13 -> trixie
    case $1 in
        *+deb12 | *+deb12[!0-9]*) echo bookworm ;;
        *+deb13 | *+deb13[!0-9]*) echo trixie ;;
        *) return 1 ;;
    esac
}

for deb in "$@"; do
    package=$(dpkg-deb -f "$deb" Package) version=$(dpkg-deb -f "$deb" Version)
    suite_of "$version" >/dev/null ||
        { echo "make-repo: $deb: version $version names no release (+deb12 or +deb13): build it with make-deb.sh" >&2; exit 1; }
    pool=$repo/pool/main/${package:0:1}/$package
    mkdir -p "$pool"
    if [ -e "$pool/${deb##*/}" ]; then
        cmp -s "$deb" "$pool/${deb##*/}" || {
            echo "make-repo: $pool/${deb##*/} is published with other contents: boards that fetched it would refuse" \
                "the new one (hash mismatch); build it with a higher version" >&2
            exit 1
        }
    else
        cp "$deb" "$pool/${deb##*/}.new" && mv "$pool/${deb##*/}.new" "$pool/${deb##*/}"
    fi
done
[ -d "$repo/pool" ] || { echo "make-repo: $repo has no pool: give it .debs" >&2; exit 64; }

# Every suite's indexes, from the whole pool, into a new dists/ that then replaces the old one.
new=$repo/dists.new
rm -rf "$new"
all=$(cd "$repo" && apt-ftparchive packages pool)
for suite in "${suites[@]}"; do
    for arch in "${arches[@]}"; do
        dir=$new/$suite/main/binary-$arch
        mkdir -p "$dir"
        # The stanzas of this suite (by version) and architecture; arch "all" packages go to both.
        awk -v RS= -v ORS='\n\n' -v suite="$suite" -v arch="$arch" '
            { v = $0; sub(/.*\nVersion: /, "", v); sub(/\n.*/, "", v)
              a = $0; sub(/.*\nArchitecture: /, "", a); sub(/\n.*/, "", a)
              s = v ~ /\+deb12([^0-9]|$)/ ? "bookworm" : v ~ /\+deb13([^0-9]|$)/ ? "trixie" : ""
              if (s == suite && (a == arch || a == "all")) print }' <<<"$all" >"$dir/Packages"
        gzip -9n <"$dir/Packages" >"$dir/Packages.gz"
        xz -9 <"$dir/Packages" >"$dir/Packages.xz"
    done
    release=(-o "APT::FTPArchive::Release::Origin=ParkWise" -o "APT::FTPArchive::Release::Label=ParkWise"
        -o "APT::FTPArchive::Release::Suite=$suite" -o "APT::FTPArchive::Release::Codename=$suite"
        -o "APT::FTPArchive::Release::Architectures=${arches[*]}" -o "APT::FTPArchive::Release::Components=main"
        -o "APT::FTPArchive::Release::Description=ParkWise garage agents for Raspberry Pi OS / Debian $suite")
    apt-ftparchive "${release[@]}" release "$new/$suite" >"$log"
    mv "$log" "$new/$suite/Release"
    gpg --batch --yes --local-user "$key" --clearsign -o "$new/$suite/InRelease" "$new/$suite/Release"
    gpg --batch --yes --local-user "$key" --armor --detach-sign -o "$new/$suite/Release.gpg" "$new/$suite/Release"
done
gpg --batch --export "$key" >"$repo/parkwise-archive-keyring.pgp.new"
mv "$repo/parkwise-archive-keyring.pgp.new" "$repo/parkwise-archive-keyring.pgp"
# A board's entry per suite: deb822 continuation lines, an empty line of the armored key as " ." (sources.list(5)).
armored=$(gpg --batch --armor --export "$key" | sed 's/^$/./; s/^/ /')
for suite in "${suites[@]}"; do
    cat >"$repo/parkwise-$suite.sources.new" <<SOURCES
# The ParkWise apt repository for Raspberry Pi OS / Debian $suite, with its signing key (trusted for this
# repository only). On a board: sudo curl -fsSLo /etc/apt/sources.list.d/parkwise.sources ${url%/}/parkwise-$suite.sources
Types: deb
URIs: $url
Suites: $suite
Components: main
Signed-By:
$armored
SOURCES
    mv "$repo/parkwise-$suite.sources.new" "$repo/parkwise-$suite.sources"
done
chmod -R a+rX "$repo"
rm -rf "$repo/dists.old"
[ ! -d "$repo/dists" ] || mv "$repo/dists" "$repo/dists.old"
mv "$new" "$repo/dists"
rm -rf "$repo/dists.old"
echo "make-repo: $repo: $(find "$repo/pool" -name '*.deb' | wc -l) packages; suites ${suites[*]} signed by $key" >&2
