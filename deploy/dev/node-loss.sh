#!/usr/bin/env bash
# The node-loss run (deploy/nats/README.md): a three-node NATS cluster on loopback ports, 24 simulated garages and two
# bridges; one node killed mid-stream and started again; exits 1 unless every seq arrived or was declared, every spot
# in the database equals the boards' retained states read from the node that came back, and both fleet views agree.
# A documented command, not in the test command: NATS 2.9.10 (Debian 12) drops a QoS 1 delivery it acknowledged now and
# then, and this run says so when it does (deploy/nats/README.md, "What counts as evidence"). Debug binaries by
# default (about 50 s); NODE_LOSS_BUILD=release for the figures; FLEET_PARTITION=1 to have the bridges split the boards.
set -euo pipefail
cd "$(dirname "$0")/../.."
FLEET_BROKER=nats FLEET_AGENTS=${NODE_LOSS_AGENTS:-24} FLEET_PEAK_S=${NODE_LOSS_PEAK_S:-20} \
    FLEET_BUILD=${NODE_LOSS_BUILD:-debug} exec bash deploy/dev/fleet-bench.sh
