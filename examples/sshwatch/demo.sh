#!/usr/bin/env bash
# demo.sh: sshwatch over a real log, once uninterrupted and once killed with kill -9 mid-way
# and started again, and a check that both give the same alerts and the same windows.
#
# Usage: examples/sshwatch/demo.sh         (make demo-sshwatch)
# Environment:
#   INPUT   the sshd log (default ../shared/data/loghub/OpenSSH_2k.log beside the repository)
#   KILLAT  kill once windows.jsonl has this many lines (default 30)
#   PACE    sshwatch --pace of the killed run (default 500us: about 2s for the sample)
#   KEEP=1  keep the temporary directories
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
INPUT=${INPUT:-../shared/data/loghub/OpenSSH_2k.log}
KILLAT=${KILLAT:-30}
PACE=${PACE:-500us}

say() { printf 'demo-sshwatch: %s\n' "$*"; }
fail() {
	printf 'demo-sshwatch: FAIL: %s\n' "$*" >&2
	exit 1
}
[[ -r $INPUT ]] || fail "INPUT=$INPUT: not a readable file (the Loghub samples live in ../shared/data/loghub)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sshwatch-demo.XXXXXX")
PID=
cleanup() {
	if [[ -n $PID ]]; then kill -9 "$PID" 2>/dev/null || true; fi
	if [[ ${KEEP:-} == 1 ]]; then say "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

go build -o "$WORK/sshwatch" ./examples/sshwatch
SSHWATCH=$WORK/sshwatch

say "1. uninterrupted: sshwatch --input $INPUT --dir A --json"
"$SSHWATCH" --input "$INPUT" --dir "$WORK/A" --json >"$WORK/A.alerts"
cat "$WORK/A.alerts"

say "2. the same in a fresh --dir B, --pace $PACE, kill -9 once windows.jsonl has $KILLAT lines"
"$SSHWATCH" --input "$INPUT" --dir "$WORK/B" --json --pace "$PACE" >"$WORK/B.alerts" &
PID=$!
while (($(cat "$WORK/B/windows.jsonl" 2>/dev/null | wc -l) < KILLAT)); do
	kill -0 "$PID" 2>/dev/null || fail "sshwatch ended before the kill"
	sleep 0.01
done
kill -9 "$PID"
wait "$PID" 2>/dev/null || true
PID=
say "killed: $(wc -l <"$WORK/B/windows.jsonl") windows.jsonl lines, $(wc -l <"$WORK/B.alerts") alerts printed; checkpoint after $(sed -n 's/.*"position":\([0-9]*\).*/\1/p' "$WORK/B/checkpoints/ssh-0.position" 2>/dev/null || echo no) lines"

say "3. started again on --dir B"
"$SSHWATCH" --input "$INPUT" --dir "$WORK/B" --json >>"$WORK/B.alerts"

say "4. compare"
sort -u "$WORK/A.alerts" >"$WORK/A.set"
sort -u "$WORK/B.alerts" >"$WORK/B.set"
diff "$WORK/A.set" "$WORK/B.set" || fail "the alert sets differ"
sort -u "$WORK/A/windows.jsonl" >"$WORK/A.windows"
sort -u "$WORK/B/windows.jsonl" >"$WORK/B.windows"
diff "$WORK/A.windows" "$WORK/B.windows" || fail "the windows differ"
say "same $(wc -l <"$WORK/A.set") alerts and $(wc -l <"$WORK/A.windows") windows with and without the kill" \
	"($(($(wc -l <"$WORK/B.alerts") - $(wc -l <"$WORK/A.set"))) alerts and" \
	"$(($(wc -l <"$WORK/B/windows.jsonl") - $(wc -l <"$WORK/A.windows"))) windows.jsonl lines written twice: at-least-once)"
