#!/usr/bin/env bash
# demo-relay.sh: Kafka -> strom log -> Kafka, at-least-once, with kill -9 of each relay mid-way.
#
# It starts an in-process Kafka (franz-go's kfake, bin/kafkatool serve) unless KAFKA_BROKERS
# names a cluster, creates two 3-partition Kafka topics, produces the lines of INPUT (the
# OpenSSH Loghub sample by default) into the first keyed by KEY, and starts two relays
# (examples/relay): A reads the Kafka topic with a consumer group and appends to a log topic;
# B reads the log topic from a FileStore position and produces to the second Kafka topic.
# It kills A with kill -9 mid-way and restarts it, then B, waits until both have no lag and
# the second topic holds as many records as the first, and checks the round trip
# (kafkatool roundtrip): every line came back byte for byte with its key, none invented, per
# key in order; records delivered again are counted and printed, not failed. It stops every
# process it started, also on failure, and exits non-zero when anything fails.
#
# Usage: scripts/demo-relay.sh          (make demo-relay)
# Environment:
#   KAFKA_BROKERS    a real cluster (comma-separated); topics strom-relay-<run>-in/-back are
#                    created there (auto-creation not needed) and left behind
#   STROM_DEMO_PORT  first of three ports: relay A, relay B, the in-process Kafka (default 7180)
#   INPUT, KEY       the file to send and the regex whose first group keys a line
#   DELAY            time each relay spends per record (default 1ms), so the kills land mid-way
#   KEEP=1           keep the temporary folder; CI=true shorter pauses
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
BIN=$ROOT/bin
BASE_PORT=${STROM_DEMO_PORT:-7180}
INPUT=${INPUT:-../shared/data/loghub/OpenSSH_2k.log}
KEY=${KEY:-([0-9]+[.][0-9]+[.][0-9]+[.][0-9]+)}
DELAY=${DELAY:-1ms}
PARTITIONS=3
RUN=$(date +%s)-$$
IN=strom-relay-$RUN-in
BACK=strom-relay-$RUN-back
LOGTOPIC=relayed

say() { printf 'demo-relay: %s\n' "$*"; }
fail() {
	printf 'demo-relay: FAIL: %s\n' "$*" >&2
	exit 1
}

[[ $BASE_PORT =~ ^[0-9]+$ ]] && ((BASE_PORT > 0 && BASE_PORT + 2 <= 65535)) ||
	fail "STROM_DEMO_PORT=$BASE_PORT: want a port number with room for the next 2"
[[ -r $INPUT ]] || fail "INPUT=$INPUT: not a readable file (the Loghub samples live in ../shared/data/loghub)"
A_PORT=$BASE_PORT
B_PORT=$((BASE_PORT + 1))
K_PORT=$((BASE_PORT + 2))
ports=("$A_PORT" "$B_PORT")
[[ -z ${KAFKA_BROKERS:-} ]] && ports+=("$K_PORT")
for port in "${ports[@]}"; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		fail "port $port is busy; set STROM_DEMO_PORT to another first port"
	fi
done

say "building bin/relay, bin/kafkatool, bin/check"
go build -o "$BIN/" ./examples/relay ./internal/cmd/kafkatool ./examples/check

WORK=$(mktemp -d "${TMPDIR:-/tmp}/strom-demo-relay.XXXXXX")
STARTED=()
cleanup() {
	local rc=$? pid i alive
	trap - EXIT INT TERM
	for pid in "${STARTED[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for ((i = 0; i < 50; i++)); do
		alive=0
		for pid in "${STARTED[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
		((alive)) || break
		sleep 0.1
	done
	for pid in "${STARTED[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if ((rc != 0)); then
		for f in "$WORK"/*.log; do
			[[ -f $f ]] || continue
			printf '\n--- %s (last lines) ---\n' "${f#"$WORK"/}" >&2
			tail -n 15 "$f" >&2
		done
	fi
	if [[ ${KEEP:-} == 1 ]]; then say "kept $WORK"; else rm -rf "$WORK"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

stat() { "$BIN/check" get "$1" "$2"; }

if [[ -z ${KAFKA_BROKERS:-} ]]; then
	"$BIN/kafkatool" serve --port "$K_PORT" >"$WORK/kafka.log" 2>&1 &
	STARTED+=("$!")
	KAFKA_PID=$!
	deadline=$((SECONDS + 10))
	until (exec 3<>"/dev/tcp/127.0.0.1/$K_PORT") 2>/dev/null; do
		kill -0 "$KAFKA_PID" 2>/dev/null || fail "the in-process Kafka exited: $(tail -n 3 "$WORK/kafka.log")"
		((SECONDS < deadline)) || fail "the in-process Kafka did not listen on $K_PORT within 10s"
		sleep 0.1
	done
	export KAFKA_BROKERS=127.0.0.1:$K_PORT
	say "in-process Kafka (kfake, pid $KAFKA_PID) on $KAFKA_BROKERS"
else
	say "Kafka at KAFKA_BROKERS=$KAFKA_BROKERS"
fi

"$BIN/kafkatool" create --topics "$IN,$BACK" --partitions "$PARTITIONS"
"$BIN/kafkatool" produce --topic "$IN" --file "$INPUT" --key "$KEY" | sed 's/^/demo-relay: /'
SENT=$("$BIN/kafkatool" count --topic "$IN")

A_URL=http://127.0.0.1:$A_PORT
B_URL=http://127.0.0.1:$B_PORT
start_a() {
	"$BIN/relay" --direction kafka-to-log --dir "$WORK/log" --from "$IN" --to "$LOGTOPIC" \
		--partitions "$PARTITIONS" --group "strom-relay-$RUN" --session-timeout 6s --addr "127.0.0.1:$A_PORT" --delay "$DELAY" >>"$WORK/relay-a.log" 2>&1 &
	A_PID=$!
	STARTED+=("$A_PID")
	wait_up relay-a "$A_PID" "$A_URL"
}
start_b() {
	"$BIN/relay" --direction log-to-kafka --dir "$WORK/log" --from "$LOGTOPIC" --to "$BACK" \
		--state "$WORK/state-b" --addr "127.0.0.1:$B_PORT" --delay "$DELAY" >>"$WORK/relay-b.log" 2>&1 &
	B_PID=$!
	STARTED+=("$B_PID")
	wait_up relay-b "$B_PID" "$B_URL"
}
wait_up() {
	local name=$1 pid=$2 url=$3 deadline=$((SECONDS + 10))
	while ((SECONDS < deadline)); do
		kill -0 "$pid" 2>/dev/null || fail "$name exited at startup: $(tail -n 3 "$WORK/$name.log")"
		stat "$url" relayed >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "$name did not answer on $url within 10s"
}
# wait_relayed URL N waits until the relay at URL has relayed at least N records.
wait_relayed() {
	local deadline=$((SECONDS + 60)) n
	while :; do
		n=$(stat "$1" relayed)
		((n >= $2)) && return 0
		((SECONDS < deadline)) || fail "$1 relayed only $n records within 60s"
		sleep 0.05
	done
}

start_a
say "relay A (pid $A_PID): Kafka $IN -> log topic $LOGTOPIC, consumer group strom-relay-$RUN, $DELAY per record"
start_b
say "relay B (pid $B_PID): log topic $LOGTOPIC -> Kafka $BACK, positions in a FileStore, $DELAY per record"

wait_relayed "$A_URL" $((SENT / 4))
n=$(stat "$A_URL" relayed)
kill -KILL "$A_PID"
wait "$A_PID" 2>/dev/null || true
say "kill -9 relay A after it read $n records; restarting it on the same consumer group (it resumes at the group's commits)"
start_a
wait_relayed "$B_URL" $((SENT / 3))
n=$(stat "$B_URL" relayed)
kill -KILL "$B_PID"
wait "$B_PID" 2>/dev/null || true
say "kill -9 relay B after it read $n records; restarting it on the same FileStore"
start_b

say "waiting for both relays to catch up"
deadline=$((SECONDS + 120))
while :; do
	back=$("$BIN/kafkatool" count --topic "$BACK")
	la=$(stat "$A_URL" lag)
	lb=$(stat "$B_URL" lag)
	if [[ $la == 0 && $lb == 0 ]] && ((back >= SENT)); then break; fi
	((SECONDS < deadline)) || fail "not caught up within 120s: lag A $la, lag B $lb, $back of $SENT records back"
	sleep 0.2
done

echo
echo "\$ kafkatool roundtrip --in $IN --out $BACK"
"$BIN/kafkatool" roundtrip --in "$IN" --out "$BACK" || fail "the round trip lost, invented or reordered records"
echo
printf '%-8s %-14s %-8s %-15s %-4s %s\n' relay direction relayed deliveredAgain lag positions
for r in A B; do
	url=$A_URL dir=kafka-to-log
	[[ $r == B ]] && url=$B_URL dir=log-to-kafka
	printf '%-8s %-14s %-8s %-15s %-4s %s\n' "$r" "$dir" "$(stat "$url" relayed)" "$(stat "$url" deliveredAgain)" \
		"$(stat "$url" lag)" "$(stat "$url" positions | tr -d ' \n')"
done
echo
say "(relayed and deliveredAgain count the current process of each relay, since its restart)"
say "PASS: every line came back from Kafka through the log with its key, in order per key; both relays resumed after kill -9"
