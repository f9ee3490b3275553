#!/usr/bin/env bash
# A package's life on its host, in a throwaway Debian root of the host's architecture: install (postinst: user,
# groups, directories, the settings from the templates, its hint), upgrades (the settings and state kept, no prompt),
# remove, reinstall, purge (what Debian policy says); for the agent also its outbox (kept and said at a remove) and an
# upgrade from the release whose config was a conffile. The package is the .deb's (parkwise-agent or parkwise-bridge).
#   deploy/package/install-cycle.sh amd64 bookworm parkwise-agent_X_amd64.deb
#   deploy/package/install-cycle.sh amd64 bookworm parkwise-bridge_X_amd64.deb
#   deploy/package/install-cycle.sh arm64 bookworm parkwise-agent_X_arm64.deb   # under qemu-user (binfmt_misc)
# The root is made once with debootstrap and cached as a tar in ~/.cache/parkwise-cross (PARKWISE_CROSS_CACHE).
set -euo pipefail
cd "$(dirname "$0")/../.."
source deploy/package/cross-env.sh
arch=${1:?usage: install-cycle.sh ARCH SUITE DEB}
suite=${2:?usage: install-cycle.sh ARCH SUITE DEB}
deb=${3:?usage: install-cycle.sh ARCH SUITE DEB}
[ -f "$deb" ] || { echo "install-cycle: no package $deb" >&2; exit 1; }
package=$(dpkg-deb -f "$deb" Package)
# What the package makes, by its settings (path owner:group:mode, each from /usr/share/PACKAGE/its name), its user and
# the postinst's closing hint.
case $package in
    parkwise-agent)
        user=parkwise
        settings=("/etc/parkwise-agent/agent.yaml root:parkwise:640")
        hint="  sudo parkwise-agent check-config --config /etc/parkwise-agent/agent.yaml && sudo systemctl enable --now parkwise-agent" ;;
    parkwise-bridge)
        user=parkwise-bridge
        settings=("/etc/parkwise-bridge/environment root:root:600" "/etc/parkwise-bridge/bridge.yaml root:parkwise-bridge:640")
        hint="  sudo parkwise-bridge check-config --config /etc/parkwise-bridge/bridge.yaml && sudo systemctl enable --now parkwise-bridge" ;;
    *) echo "install-cycle: $deb is $package, not parkwise-agent or parkwise-bridge" >&2; exit 1 ;;
esac
work=$(mktemp -d /tmp/parkwise-cycle.XXXXXX)
binfmt_added=
cleanup() {
    rm -rf "$work"
    if [ -n "$binfmt_added" ]; then echo -1 >"/proc/sys/fs/binfmt_misc/$binfmt_added" || true; fi
}
trap cleanup EXIT
fail() { echo "install-cycle ($package, $arch, $suite): FAIL: $*" >&2; exit 1; }
log=$work/log
: >"$log"

# A foreign root's programs (dpkg's maintainer scripts, the agent, systemd-analyze) run under qemu-user: the kernel
# hands arm64 ELF files to qemu-aarch64-static once binfmt_misc knows it. Registered here with the F flag (the
# interpreter opened now, so it works inside the chroot) if nothing registered it, and removed again at the end.
if [ "$arch" = arm64 ] && [ "$(uname -m)" != aarch64 ]; then
    install_missing qemu-user-static
    binfmt=/proc/sys/fs/binfmt_misc
    mountpoint -q "$binfmt" || mount -t binfmt_misc binfmt_misc "$binfmt" ||
        fail "binfmt_misc cannot be mounted (needs root): arm64 programs cannot run on this $(uname -m) host"
    if ! grep -l "^interpreter .*qemu-aarch64" "$binfmt"/* >/dev/null 2>&1; then
        # Magic and mask of an ELF64 little-endian executable for EM_AARCH64 (qemu's own binfmt entry).
        # shellcheck disable=SC2028  # (binfmt_misc decodes the \x escapes itself: they go in as written)
        echo ':parkwise-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64-static:F' \
            >"$binfmt/register" || fail "cannot register qemu-aarch64-static with binfmt_misc"
        binfmt_added=parkwise-aarch64
    fi
fi

base=$CROSS_CACHE/$suite-$arch-systemd-root.tar
[ "$arch" = amd64 ] && [ -e "$CROSS_CACHE/bookworm-systemd-root.tar" ] && [ "$suite" = bookworm ] &&
    mv "$CROSS_CACHE/bookworm-systemd-root.tar" "$base"   # (the cache's name before arm64 roots)
if [ ! -e "$base" ]; then
    # systemd for `systemd-analyze verify` of the installed unit (not booted: a chroot).
    quiet debootstrap --arch="$arch" --variant=minbase --include=systemd "$suite" "$work/base" "$CROSS_MIRROR"
    quiet chroot_run "$work/base" apt-get update -q
    tar -C "$work/base" -cf "$base.new" .
    mv "$base.new" "$base"
    rm -rf "$work/base"
fi
root=$work/root
mkdir -p "$root"
tar -C "$root" -xf "$base"
cp "$deb" "$root/tmp/v1.deb"
# The upgrade: the same package with a higher version (its templates unchanged, as in a bug-fix release).
dpkg-deb -R "$deb" "$work/v2"
sed -i 's/^Version: \(.*\)/Version: \1+ci1/' "$work/v2/DEBIAN/control"
dpkg-deb --root-owner-group --build "$work/v2" "$root/tmp/v2.deb" >/dev/null
# A second upgrade that changes the shipped templates: the settings are the host's own (no conffiles), so the upgrade
# asks nothing (stdin closed, no --force-conf* option: what an unattended upgrade must get through) and leaves them.
sed -i 's/+ci1$/+ci2/' "$work/v2/DEBIAN/control"
for setting in "${settings[@]}"; do
    path=${setting%% *}
    echo "# v3" >>"$work/v2/usr/share/$package/${path##*/}"
done
(cd "$work/v2" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
    >"$work/v2/DEBIAN/md5sums"
dpkg-deb --root-owner-group --build "$work/v2" "$root/tmp/v3.deb" >/dev/null
# A package of before the config left the conffiles (the agent's 0.1.0 shipped /etc/parkwise-agent/agent.yaml as one):
# a lower version with the template as that conffile.
if [ "$package" = parkwise-agent ]; then
    dpkg-deb -R "$deb" "$work/v0"
    sed -i 's/^Version: \(.*\)/Version: \1~conffile/' "$work/v0/DEBIAN/control"
    install -D -m 0640 "$work/v0/usr/share/parkwise-agent/agent.yaml" "$work/v0/etc/parkwise-agent/agent.yaml"
    echo /etc/parkwise-agent/agent.yaml >"$work/v0/DEBIAN/conffiles"
    chmod 0644 "$work/v0/DEBIAN/conffiles"
    (cd "$work/v0" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
        >"$work/v0/DEBIAN/md5sums"
    dpkg-deb --root-owner-group --build "$work/v0" "$root/tmp/v0.deb" >/dev/null
fi
in_root() { chroot_run "$root" "$@"; }
unit=/lib/systemd/system/$package.service
[ "$suite" = bookworm ] || unit=/usr/lib/systemd/system/$package.service
check() { in_root sh -c "$1" >"$log" 2>&1 || { cat "$log" >&2; fail "after $2: $1"; }; }
# check_settings STEP: each setting there with its owner and mode.
check_settings() {
    local setting
    for setting in "${settings[@]}"; do
        check "[ \"\$(stat -c %U:%G:%a ${setting%% *})\" = ${setting#* } ]" "$1"
    done
}
# check_edits STEP [not]: the edit made on site is (not) in every setting, and no template's "# v3" line.
check_edits() {
    local setting
    for setting in "${settings[@]}"; do
        check "grep '# edited on site' ${setting%% *} && ! grep '# v3' ${setting%% *}" "$1"
    done
}

in_root apt-get install -y -q --no-install-recommends /tmp/v1.deb >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; fail "install"; }
grep -F "$hint" "$work/install.log" >/dev/null || { cat "$work/install.log" >&2; fail "postinst's closing hint"; }
check_settings install
check "[ -f $unit ] && systemd-analyze verify $unit" install
check "man -w $package || [ -f /usr/share/man/man1/$package.1.gz ]" install
etc=/etc/$package
if [ "$package" = parkwise-agent ]; then
    check 'id -nG parkwise | grep -w gpio && id -nG parkwise | grep -w parkwise' install
    # shellcheck disable=SC2016  # (expanded by sh in the root)
    check '[ "$(stat -c %U:%G:%a /var/lib/parkwise-agent)" = parkwise:parkwise:750 ]' install
    check "[ -f ${unit%/systemd/*}/udev/rules.d/60-parkwise-agent-gpio.rules ]" install
    # The hint's first command, as typed (systemctl needs a booted system, not a chroot): refused until the installer
    # sets the board's device id, then ok.
    check 'parkwise-agent check-config /etc/parkwise-agent/agent.yaml; [ $? = 78 ]' install
    check 'parkwise-agent check-config /etc/parkwise-agent/agent.yaml 2>&1 | grep "device is empty"' install
    check 'sed -i "s/^device: .*/device: ci-gate/" /etc/parkwise-agent/agent.yaml && parkwise-agent check-config /etc/parkwise-agent/agent.yaml' install
    check 'touch /var/lib/parkwise-agent/outbox-marker' edit
else
    check "[ \"\$(stat -c %U:%G:%a $etc)\" = root:parkwise-bridge:750 ] && id parkwise-bridge" install
    # The template's settings are valid as shipped; the service, as systemd starts it with them (DATABASE_URL left
    # empty), refuses with a usage error (64: not restarted) that names what to set.
    check "parkwise-bridge check-config $etc/bridge.yaml" install
    check "set -a; . $etc/environment; parkwise-bridge run --migrate --broker \"\$BROKER_URL\" --config $etc/bridge.yaml 2>&1; [ \$? = 64 ]" install
    check "set -a; . $etc/environment; parkwise-bridge run --broker \"\$BROKER_URL\" --config $etc/bridge.yaml 2>&1 | grep DATABASE_URL" install
fi
for setting in "${settings[@]}"; do check "echo '# edited on site' >> ${setting%% *}" edit; done

in_root dpkg -i /tmp/v2.deb >"$log" 2>&1 || { cat "$log" >&2; fail "upgrade"; }
check_edits upgrade
check_settings upgrade
check "id $user && dpkg-query -W -f='\${Version}' $package | grep '+ci1\$' && [ -f $unit ]" upgrade
[ "$package" = parkwise-bridge ] || check '[ -e /var/lib/parkwise-agent/outbox-marker ]' upgrade

in_root dpkg -i /tmp/v3.deb </dev/null >"$log" 2>&1 || { cat "$log" >&2; fail "upgrade (changed templates)"; }
check_edits "upgrade (changed templates)"
check "! ls $etc/*.dpkg-* && grep '# v3' /usr/share/$package/*" "upgrade (changed templates)"

if [ "$package" = parkwise-agent ]; then
    check 'install -d -o parkwise /var/lib/parkwise-agent/outbox && touch /var/lib/parkwise-agent/outbox/outbox.log' "an outbox"
fi
in_root dpkg -r "$package" >"$log" 2>&1 || { cat "$log" >&2; fail "remove"; }
if [ "$package" = parkwise-agent ]; then
    grep -F "the outbox in /var/lib/parkwise-agent/outbox (events not delivered yet, if any) is kept" "$log" >/dev/null ||
        { cat "$log" >&2; fail "remove: no word of the outbox kept"; }
    check '[ -e /var/lib/parkwise-agent/outbox-marker ]' remove
fi
check "[ ! -e /usr/bin/$package ] && [ ! -e $unit ] && id $user" remove
check_edits remove
# A reinstall after the remove keeps the host's settings (no template over them).
in_root dpkg -i /tmp/v3.deb </dev/null >"$log" 2>&1 || { cat "$log" >&2; fail "reinstall"; }
check_edits reinstall
check_settings reinstall
check "echo 'username=ci' > $etc/credentials && chown $user: $etc/credentials" "credentials added"

[ "$package" = parkwise-bridge ] || check 'printf record > /var/lib/parkwise-agent/outbox/outbox.log' "an outbox with records"
in_root dpkg -P "$package" >"$log" 2>&1 || { cat "$log" >&2; fail "purge"; }
if [ "$package" = parkwise-agent ]; then
    # An outbox that may hold undelivered events is kept aside, and the purge says where.
    grep -F "parkwise-agent: the state directory is kept aside in /var/backups/parkwise-agent-" "$log" >/dev/null ||
        { cat "$log" >&2; fail "purge: no word of the outbox kept aside"; }
    # shellcheck disable=SC2016  # (expanded by sh in the root)
    check '[ "$(cat /var/backups/parkwise-agent-*/outbox/outbox.log)" = record ] && [ -e /var/backups/parkwise-agent-*/outbox-marker ]' purge
fi
# The user stays (the credentials kept below are its files: a freed uid could hand them to another package's user).
check "getent passwd $user" purge
for setting in "${settings[@]}"; do check "[ ! -e ${setting%% *} ]" purge; done
check "[ \"\$(stat -c %U $etc/credentials)\" = $user ]" purge
[ "$package" = parkwise-bridge ] || check 'getent group gpio && [ ! -e /var/lib/parkwise-agent ]' purge
if [ "$package" = parkwise-agent ]; then
    # From the conffile era: the edited config stays, the upgrade asks nothing (stdin closed, no --force-conf*), dpkg
    # keeps the file as an obsolete conffile, and the purge takes it.
    in_root dpkg -i /tmp/v0.deb </dev/null >"$log" 2>&1 || { cat "$log" >&2; fail "install (conffile era)"; }
    check 'echo "# edited in the conffile era" >> /etc/parkwise-agent/agent.yaml' "install (conffile era)"
    in_root dpkg -i /tmp/v3.deb </dev/null >"$log" 2>&1 || { cat "$log" >&2; fail "upgrade from the conffile era"; }
    check 'grep "# edited in the conffile era" /etc/parkwise-agent/agent.yaml && ! ls /etc/parkwise-agent/*.dpkg-*' \
        "upgrade from the conffile era"
    check "dpkg-query -W -f='\${Conffiles}' parkwise-agent | grep '/etc/parkwise-agent/agent.yaml .* obsolete'" \
        "upgrade from the conffile era"
    in_root dpkg -P parkwise-agent >"$log" 2>&1 || { cat "$log" >&2; fail "purge (after the conffile era)"; }
    check '[ ! -e /etc/parkwise-agent/agent.yaml ] && [ ! -e /var/lib/parkwise-agent ]' "purge (after the conffile era)"
fi
echo "install-cycle ($package, $arch, $suite): ok" >&2
