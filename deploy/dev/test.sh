#!/usr/bin/env bash
# The test suite: installs what is missing, builds, and runs every test. The tests start their own
# mosquitto brokers on free loopback ports and end them by PID; the GPIO tests boot a real kernel
# with simulated GPIO chips under qemu (hardware/sim/, cached in ~/.cache/parkwise-vm). provision-check.sh: a board
# provisioned and revoked on a TLS broker (deploy/mosquitto/README.md). deploy/prometheus/check.sh: the alert rules
# and their unit tests (promtool). check-scripts.sh: shellcheck over every shell script.
set -euo pipefail
cd "$(dirname "$0")/../.."

bash deploy/dev/setup.sh
bash deploy/dev/check-scripts.sh
mkdir -p .build
# The build's output in a file: all of it on failure, the last lines otherwise.
swift build --build-tests >.build/test-build.log 2>&1 || { cat .build/test-build.log >&2; exit 1; }
tail -n 3 .build/test-build.log
swift test --skip-build
bash deploy/prometheus/check.sh
bash deploy/mosquitto/provision-check.sh
bash hardware/sim/run-tests.sh
bash deploy/dev/demo-check.sh
