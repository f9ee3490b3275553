#!/usr/bin/env bash
# The test suite: installs what is missing, builds, and runs every test. The tests start their own
# mosquitto brokers on free loopback ports and end them by PID; the GPIO tests boot a real kernel
# with simulated GPIO chips under qemu (hardware/sim/, cached in ~/.cache/parkwise-vm).
set -euo pipefail
cd "$(dirname "$0")/../.."

bash deploy/dev/check-scripts.sh
bash deploy/dev/setup.sh
swift build --build-tests
swift test --skip-build
bash hardware/sim/run-tests.sh
