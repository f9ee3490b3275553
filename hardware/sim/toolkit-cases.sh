# shellcheck shell=bash
# Sourced by run-tests.sh: the technician's commands on real kernel GPIO lines.
#
# walk_test (guest config walk.yaml): the host plays the installer: it waits for each prompt, then drives the lines
# as the sensors would, with P1-A-01's and P1-A-02's sensors on each other's lines; the JSON report must name that
# pair and confirm the rest.
# walk_learn (guest config walk-learn.yaml, its spots UNSET): walk-test --learn writes each covered spot's line into
# the file, refuses a line the lane has, learns a line high at rest as active-low; check-config then passes the file.
# doctor_checks (guest config doctor.yaml): doctor requests the lines itself when the agent is stopped (one spot
# reads occupied at rest: a warning), and reads the running agent's status instead while it runs (its lines stay
# the agent's); the VM's broker passes every broker check.

# walk_wait N: guest command waiting (20 s at most) until the walk-test asks for step N of 4 (5: it has ended).
walk_wait() {
    if [[ $1 -le 4 ]]; then
        printf '%s' "n=0; until grep -q '\\[$1/4\\]' /tmp/walk.err; do n=\$((n + 1)); [ \$n -gt 400 ] && { cat /tmp/walk.err; exit 1; }; usleep 50000; done"
    else
        printf '%s' "n=0; until [ -f /tmp/walk.rc ]; do n=\$((n + 1)); [ \$n -gt 400 ] && { cat /tmp/walk.err; exit 1; }; usleep 50000; done"
    fi
}

walk_test() {
    check "walk-test starts, lines requested, asks for the lane" "(\$AGENT walk-test --config /sim/configs/walk.yaml --report /tmp/walk.json --json > /tmp/walk.out 2> /tmp/walk.err < /dev/null; echo \$? > /tmp/walk.rc) & $(walk_wait 1) && wait_used pi4 24 && wait_used mcp 0" &&
    check "lane driven a then b: confirmed" "pull pi4 24 up; usleep 200000; pull pi4 25 up; usleep 200000; pull pi4 24 down; usleep 200000; pull pi4 25 down; $(walk_wait 2) && grep 'ramp confirmed' /tmp/walk.err" &&
    check "covering P1-A-01 changes GPA1: swapped with P1-A-02" "pull mcp 1 up; $(walk_wait 3); usleep 200000; pull mcp 1 down; grep 'P1-A-01 swapped' /tmp/walk.err" &&
    check "covering P1-A-02 changes GPA0: swapped with P1-A-01" "pull mcp 0 up; $(walk_wait 4); usleep 200000; pull mcp 0 down; grep 'P1-A-02 swapped' /tmp/walk.err" &&
    check "P1-A-03 confirmed, the walk ends with exit 1" "pull pi4 26 up; $(walk_wait 5); cat /tmp/walk.err; [ \"\$(cat /tmp/walk.rc)\" = 1 ]" &&
    check "JSON report: the pair named both ways, the rest confirmed" "tr -d ' \\n' < /tmp/walk.out > /tmp/walk.compact; cat /tmp/walk.compact; echo; grep -q '\"counts\":{\"confirmed\":2,\"swapped\":2}' /tmp/walk.compact && grep -q '\"id\":\"P1-A-01\",\"inputs\":\\[\"mcp23017:GPA0\"\\],\"kind\":\"spot\",\"other\":\"spotP1-A-02\",\"otherInput\":\"mcp23017:GPA1\",\"verdict\":\"swapped\"' /tmp/walk.compact && grep -q '\"id\":\"P1-A-02\",\"inputs\":\\[\"mcp23017:GPA1\"\\],\"kind\":\"spot\",\"other\":\"spotP1-A-01\",\"otherInput\":\"mcp23017:GPA0\",\"verdict\":\"swapped\"' /tmp/walk.compact && [ -f /tmp/walk.txt ]" &&
    check "lines released" "wait_free pi4 24 && wait_free mcp 0"
}

# learn_wait TEXT: guest command waiting (20 s at most) until walk-test --learn has said TEXT (a fixed string).
learn_wait() {
    printf '%s' "n=0; until grep -qF '$1' /tmp/learn.out; do n=\$((n + 1)); [ \$n -gt 400 ] && { cat /tmp/learn.out /tmp/learn.err; exit 1; }; usleep 50000; done"
}

walk_learn() {
    check "walk-test --learn on a config with every spot UNSET: watches the free lines, asks for the first spot" "cp /sim/configs/walk-learn.yaml /tmp/learn.yaml && pulls mcp '0 1' down && pulls pi4 '24 25' down && pull pi4 26 up && (\$AGENT walk-test --learn --config /tmp/learn.yaml --report /tmp/learn.txt > /tmp/learn.out 2> /tmp/learn.err < /dev/null & echo \$! > /tmp/learn.pid; wait \$!; echo \$? > /tmp/learn.rc) & $(learn_wait '[1/3] Cover P1-A-01') && wait_used mcp 0 && wait_used pi4 26 && wait_used pi4 24 && head -n 1 /tmp/learn.out" &&
    check "P1-A-01 covered (GPA0): learned, written to the file at once" "pull mcp 0 up; $(learn_wait 'P1-A-01 = mcp23017:GPA0, written to /tmp/learn.yaml'); pull mcp 0 down; grep -F '{ id: \"P1-A-01\", input: \"mcp23017:GPA0\", delayed_on: 100ms }   # A01 EV' /tmp/learn.yaml" &&
    check "P1-A-02's sensor on the lane's loop a: refused, named" "$(learn_wait '[2/3] Cover P1-A-02') && pull pi4 24 up; $(learn_wait 'P1-A-02: the line that moved, GPIO24, is lane ramp loop a'); pull pi4 24 down" &&
    check "P1-A-02 covered again, on GPA1: learned" "pull mcp 1 up; $(learn_wait 'P1-A-02 = mcp23017:GPA1'); pull mcp 1 down" &&
    check "P1-A-03 on GPIO26, high at rest, pulled low: learned active-low, the walk ends with exit 0" "$(learn_wait '[3/3] Cover P1-A-03') && pull pi4 26 down; $(learn_wait 'P1-A-03 = GPIO26, active_low: true'); n=0; until [ -f /tmp/learn.rc ]; do n=\$((n + 1)); [ \$n -gt 400 ] && exit 1; usleep 50000; done; cat /tmp/learn.out /tmp/learn.err; [ \"\$(cat /tmp/learn.rc)\" = 0 ]" &&
    check "the file: inputs in place, comments kept, and check-config passes it" "cat /tmp/learn.yaml; grep -F 'input: \"mcp23017:GPA1\"' /tmp/learn.yaml && grep -Fx '    input: GPIO26   # by the pillar' /tmp/learn.yaml && grep -Fx '    active_low: true' /tmp/learn.yaml && ! grep -E 'input: *UNSET' /tmp/learn.yaml && \$AGENT check-config /tmp/learn.yaml" &&
    check "the hand-over report, and the lines released" "cat /tmp/learn.txt; grep -E '^P1-A-03 +P1 +GPIO26 +true' /tmp/learn.txt && grep -F '3 of 3 learned' /tmp/learn.txt && wait_free mcp 0 && wait_free pi4 26 && wait_free pi4 24"
}

# doctor_json: guest command running doctor with --json into /tmp/doctor.json, compacted (no spaces) into /tmp/doctor.c.
doctor_json() {   # extra doctor options, e.g. --empty-garage
    printf '%s' "\$AGENT doctor --config /sim/configs/doctor.yaml --json --timeout 3 $* > /tmp/doctor.json; rc=\$?; tr -d ' \\n' < /tmp/doctor.json > /tmp/doctor.c; cat /tmp/doctor.json; [ \$rc = 0 ]"
}

doctor_checks() {
    check "agent stopped: doctor requests the lines, exit 0" "pull pi4 21 up; $(doctor_json)" &&
    check "lines present and requestable, released again" "grep -q '\"title\":\"2linespresentandrequestable\"' /tmp/doctor.c && wait_free pi4 20 && wait_free pi4 21" &&
    check "the spot occupied at rest is named as a vehicle now, no polarity advice from one reading (issue 22)" "grep -q '\"detail\":\"spotP1-A-21(GPIO21)\\.Parked[^\"]*\",\"status\":\"ok\",\"title\":\"1of2inputsreadoccupied[^\"]*avehiclenow\"' /tmp/doctor.c && ! grep -q 'ifnothingisthere' /tmp/doctor.c" &&
    check "told the garage is empty: a warning naming it, with the polarity fix" "$(doctor_json --empty-garage) && grep -q '\"detail\":\"spotP1-A-21(GPIO21)\",\"fix\":\"ifnothingisthere.*\"status\":\"warning\",\"title\":\"1of2inputsreadoccupied[^\"]*avehicleinagaragesaidtobeempty' /tmp/doctor.c && wait_free pi4 20 && wait_free pi4 21" &&
    check "every broker check passes" "grep -q 'subscribetoitscommands.*:grantedQoS1' /tmp/doctor.c && grep -q 'themessagecamebackthroughasubscription' /tmp/doctor.c" &&
    check "agent running: doctor reads its status, exit 0" "start doctor doctor.yaml && $(doctor_json)" &&
    check "inputs from the service, its lines stay its own" "grep -q '\"title\":\"2inputswatchedbytherunningservice\"' /tmp/doctor.c && grep -q 'itslinkisconnected' /tmp/doctor.c && info pi4 20 | grep parkwise-agent && info pi4 21 | grep parkwise-agent" &&
    check "clean stop" "stop doctor && wait_free pi4 20"
}
