#!/usr/bin/env bash
# Scripts under `set -o pipefail` must not pipe a producer into a reader that stops early (grep -q, grep -m,
# head): the reader exits at its first match, the producer dies of SIGPIPE, and the pipeline fails at random,
# more often the more the producer prints. Read the output whole instead: `grep -q X <<<"$(producer)"`,
# `producer | grep X >/dev/null`, `find … -print -quit`. Lists every offender (file:line) and exits 1 if any.
set -euo pipefail
cd "$(dirname "$0")/../.."

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
done < <(git ls-files '*.sh' .ci/run)
[[ $bad -eq 0 ]] || { echo "check-scripts: fix the lines above (see the comment at the top of $0)" >&2; exit 1; }
echo "check-scripts: $(git ls-files '*.sh' .ci/run | wc -l) scripts, no early-exit readers under pipefail" >&2
