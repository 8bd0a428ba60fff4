#!/usr/bin/env bash
# demo-scale.sh: examples/sshwatch on 3 processes of one Kafka consumer group, over an
# in-process Kafka, one killed with kill -9 and a fourth started mid-way; the alerts and
# windows they print together must equal sshwatch's on one process (issue 18).
#
# bin/demoscale (internal/cmd/demoscale) runs franz-go's kfake in its own process, produces
# the lines of INPUT into a 6-partition topic keyed by source IP, starts the sshwatch
# workers (sshwatch --brokers ...), drives the kill and the join on the group's commits,
# closes the last windows with one sentinel per partition, stops the workers with SIGTERM
# and compares (see internal/scaledemo). It prints the events and a report, and exits
# non-zero when anything differs.
#
# Usage: scripts/demo-scale.sh          (make demo-scale)
# Environment:
#   INPUT   the sshd log (default ../shared/data/loghub/OpenSSH_2k.log beside the repository;
#           when that default is missing, a clone without ../shared, the demo is skipped)
#   FLAGS   more flags for bin/demoscale (--seed N, --repartition, --kill=false, --dir DIR)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
DEFAULT_INPUT=../shared/data/loghub/OpenSSH_2k.log
INPUT=${INPUT:-$DEFAULT_INPUT}

if [[ ! -r $INPUT ]]; then
	if [[ $INPUT == "$DEFAULT_INPUT" ]]; then
		printf 'demo-scale: %s not found (the Loghub samples live in ../shared/data/loghub beside the repository): skipping; set INPUT to an sshd log to run it\n' "$INPUT"
		exit 0
	fi
	printf 'demo-scale: FAIL: INPUT=%s: not a readable file\n' "$INPUT" >&2
	exit 1
fi

printf 'demo-scale: building bin/sshwatch and bin/demoscale\n'
go build -o bin/ ./examples/sshwatch ./internal/cmd/demoscale
# shellcheck disable=SC2086 # FLAGS is a list of flags
exec ./bin/demoscale --input "$INPUT" --sshwatch bin/sshwatch ${FLAGS:-}
