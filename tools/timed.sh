#!/usr/bin/env bash
# Run a command and print how long it took, for the phase times in CI's log:
#   tools/timed.sh NAME COMMAND [ARG ...]   →   "phase NAME: 42 s (exit 0)"
# Exits with the command's status.
name=$1
shift
start=$(date +%s)
"$@"
status=$?
echo "phase $name: $(( $(date +%s) - start )) s (exit $status)"
exit $status
