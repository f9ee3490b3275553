#!/usr/bin/env bash
# Checks the alert rules (promtool check rules) and runs their unit tests (promtool test rules), as
# deploy/dev/test.sh does. promtool comes with Debian's `prometheus` package (deploy/dev/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v promtool >/dev/null; then
    echo "check.sh: promtool not found: apt install --no-install-recommends prometheus (deploy/dev/setup.sh does)" >&2
    exit 1
fi
promtool check rules parkwise.rules.yml
promtool test rules parkwise.rules.test.yml
