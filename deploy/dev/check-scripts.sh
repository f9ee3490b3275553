#!/usr/bin/env bash
# The repo's shell scripts (every *.sh, .ci/run, each file with a sh or bash shebang or a `# shellcheck shell=` line):
# run by shellcheck (Debian's package) over all of them, from the repo's root so that `# shellcheck source=` paths resolve;
# then the rule below. Lists every finding and exits 1 if any. Part of deploy/dev/test.sh.
# Scripts under `set -o pipefail` must not pipe a producer into a reader that stops early (grep -q, grep -m,
# head): the reader exits at its first match, the producer dies of SIGPIPE, and the pipeline fails at random,
# more often the more the producer prints. Read the output whole instead: `grep -q X <<<"$(producer)"`,
# `producer | grep X >/dev/null`, `find … -print -quit`. Lists every offender (file:line) and exits 1 if any.
set -euo pipefail
cd "$(dirname "$0")/../.."

scripts() {
    local file
    git ls-files | while IFS= read -r file; do
        [ -f "$file" ] || continue
        case $file in
            *.sh) echo "$file" ;;
            *) { head -n 1 "$file" | grep -E '^#!.*[/ ](ba)?sh( |$)' || grep -E '^# shellcheck shell=' "$file"; } > /dev/null \
                   && echo "$file" ;;
        esac
    done
}
mapfile -t files < <(scripts)
command -v shellcheck > /dev/null || { echo "check-scripts: shellcheck is not installed: bash deploy/dev/setup.sh" >&2; exit 1; }
shellcheck --external-sources --format=gcc "${files[@]}" >&2 \
    || { echo "check-scripts: shellcheck: fix the findings above" >&2; exit 1; }

early_exit='[|][[:space:]]*(grep[[:space:]]+(-[a-zA-Z]*[qm]|--quiet|--max-count)|head([[:space:]]|$))'
bad=0
while IFS= read -r file; do
    grep -q pipefail "$file" || continue
    hits="$(grep -nE "$early_exit" "$file" || true)"
    [[ -n "$hits" ]] || continue
    while IFS= read -r hit; do
        echo "$file:${hit%%:*}: a producer piped into a reader that stops early under pipefail: ${hit#*:}" >&2
        bad=1
    done <<<"$hits"
done < <(printf '%s\n' "${files[@]}")
[[ $bad -eq 0 ]] || { echo "check-scripts: fix the lines above (see the comment at the top of $0)" >&2; exit 1; }
echo "check-scripts: ${#files[@]} scripts shellcheck clean, no early-exit readers under pipefail" >&2
