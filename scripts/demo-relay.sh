#!/usr/bin/env bash
# demo-relay.sh: Kafka -> strom log -> Kafka with kill -9s of the relays mid-way, at-least-once
# and then exactly-once.
#
# It starts an in-process Kafka (franz-go's kfake, bin/kafkatool serve) unless KAFKA_BROKERS
# names a cluster. Each mode then creates two 3-partition Kafka topics, produces the lines of
# INPUT (the OpenSSH Loghub sample by default) into the first keyed by KEY, and starts two
# relays (examples/relay): A reads the Kafka topic with a consumer group and appends to a log
# topic; B reads the log topic and produces to the second Kafka topic.
#
#   at-least-once   B keeps its positions in a FileStore. A is killed with kill -9 mid-way
#                   and restarted, then B: both hand out again what they did since their last
#                   saved position, and the second topic holds duplicates.
#   exactly-once    both relays run with --exactly-once. B's records and its log positions go
#                   into Kafka transactions together (sink.KafkaTransactionalID); A's appends
#                   and its Kafka positions are committed together in the log topic's
#                   transaction file (sink.LogSink), and A reads Kafka read_committed. A is
#                   killed with kill -9 mid-way, then B. A_EXACTLY_ONCE=0 leaves A at-least-once
#                   and unkilled (B is killed twice).
#
# Each mode waits until both relays have no lag and the second topic holds as many records as
# the first, and checks the round trip (kafkatool roundtrip, reading committed records only):
# every line came back byte for byte with its key, none invented, per key in order; duplicates
# are counted and printed, and kafkatool sources counts relay B's own (by the log record each
# names). At-least-once passes with duplicates; exactly-once must print 0 duplicates. The end
# prints both modes' counts side by side. It stops every process it started, also on failure,
# and exits non-zero when anything fails.
#
# Usage: scripts/demo-relay.sh          (make demo-relay)
# Environment:
#   KAFKA_BROKERS    a real cluster (comma-separated); topics strom-relay-<run>-<mode>-in/-back
#                    (and relay B's positions topic in exactly-once mode) are created there
#                    (auto-creation not needed) and left behind
#   STROM_DEMO_PORT  first of three ports: relay A, relay B, the in-process Kafka (default 7180)
#   INPUT, KEY       the file to send and the regex whose first group keys a line
#   DELAY            time relay A spends per record (default 1ms), so the kills land mid-way
#   B_DELAY          time relay B spends per record (default 2ms): slower than A, it is behind
#                    when it is killed, with records handed to Kafka but not yet saved
#   MODES            the modes to run, in order (default "at-least-once exactly-once")
#   A_EXACTLY_ONCE   1 (the default): relay A with --exactly-once too, and killed, in exactly-once mode
#   KEEP=1           keep the temporary folder; CI=true shorter pauses
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
BIN=$ROOT/bin
BASE_PORT=${STROM_DEMO_PORT:-7180}
INPUT=${INPUT:-../shared/data/loghub/OpenSSH_2k.log}
KEY=${KEY:-([0-9]+[.][0-9]+[.][0-9]+[.][0-9]+)}
DELAY=${DELAY:-1ms}
B_DELAY=${B_DELAY:-2ms}
PARTITIONS=3
MODES=${MODES:-at-least-once exactly-once}
A_EXACTLY_ONCE=${A_EXACTLY_ONCE:-1}
RUN=$(date +%s)-$$
LOGTOPIC=relayed

say() { printf 'demo-relay: %s\n' "$*"; }
fail() {
	printf 'demo-relay: FAIL: %s\n' "$*" >&2
	exit 1
}

[[ $BASE_PORT =~ ^[0-9]+$ ]] && ((BASE_PORT > 0 && BASE_PORT + 2 <= 65535)) ||
	fail "STROM_DEMO_PORT=$BASE_PORT: want a port number with room for the next 2"
[[ -r $INPUT ]] || fail "INPUT=$INPUT: not a readable file (the Loghub samples live in ../shared/data/loghub)"
for mode in $MODES; do
	[[ $mode == at-least-once || $mode == exactly-once ]] || fail "MODES: $mode: want at-least-once or exactly-once"
done
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

A_URL=http://127.0.0.1:$A_PORT
B_URL=http://127.0.0.1:$B_PORT
start_a() {
	"$BIN/relay" --direction kafka-to-log --dir "$MWORK/log" --from "$IN" --to "$LOGTOPIC" \
		--partitions "$PARTITIONS" --group "strom-relay-$RUN-$MODE" --session-timeout 6s --addr "127.0.0.1:$A_PORT" --delay "$DELAY" \
		"${A_FLAGS[@]}" >>"$WORK/relay-a-$MODE.log" 2>&1 &
	A_PID=$!
	STARTED+=("$A_PID")
	wait_up relay-a-"$MODE" "$A_PID" "$A_URL"
}
start_b() {
	"$BIN/relay" --direction log-to-kafka --dir "$MWORK/log" --from "$LOGTOPIC" --to "$BACK" \
		--addr "127.0.0.1:$B_PORT" --delay "$B_DELAY" "${B_FLAGS[@]}" >>"$WORK/relay-b-$MODE.log" 2>&1 &
	B_PID=$!
	STARTED+=("$B_PID")
	wait_up relay-b-"$MODE" "$B_PID" "$B_URL"
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
# kill_restart A|B WHEN kills relay A or B with kill -9 and starts it again on the same state.
kill_restart() {
	local which=$1 url pid n
	if [[ $which == A ]]; then url=$A_URL pid=$A_PID; else url=$B_URL pid=$B_PID; fi
	n=$(stat "$url" relayed)
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null || true
	[[ $which == B ]] && B_HANDED=$((B_HANDED + n))
	if [[ $which == A ]]; then
		say "$MODE: kill -9 relay A after it read $n records; restarting it on the same consumer group (it resumes at the group's commits)"
		start_a
	else
		say "$MODE: kill -9 relay B after it read $n records; restarting it (it resumes at its $B_STATE)"
		start_b
	fi
}
# stop_relays stops both relays with SIGTERM; each must exit 0.
stop_relays() {
	local pid
	for pid in "$A_PID" "$B_PID"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "$A_PID" "$B_PID"; do wait "$pid" || fail "$MODE: a relay (pid $pid) did not stop cleanly"; done
}

ROW_FILE=$WORK/rows
: >"$ROW_FILE"
# run_mode MODE: the whole relay through kill -9s in one mode, on topics and a log of its own.
run_mode() {
	MODE=$1
	IN=strom-relay-$RUN-$MODE-in
	BACK=strom-relay-$RUN-$MODE-back
	MWORK=$WORK/$MODE
	mkdir -p "$MWORK"
	A_FLAGS=()
	B_FLAGS=(--state "$MWORK/state-b")
	B_STATE="FileStore"
	local kills=(A B) a_mode=at-least-once
	B_HANDED=0
	if [[ $MODE == exactly-once ]]; then
		B_FLAGS=(--exactly-once --transactional-id "strom-relay-$RUN-b")
		B_STATE="committed positions (Kafka topic strom-relay-$RUN-b-positions)"
		kills=(B B)
		if [[ $A_EXACTLY_ONCE == 1 ]]; then
			A_FLAGS=(--exactly-once)
			a_mode=exactly-once
			kills=(A B)
		fi
	fi
	echo
	say "=== $MODE: relay A $a_mode, relay B $MODE; kill -9 of ${kills[*]} ==="
	"$BIN/kafkatool" create --topics "$IN,$BACK" --partitions "$PARTITIONS"
	"$BIN/kafkatool" produce --topic "$IN" --file "$INPUT" --key "$KEY" | sed "s/^/demo-relay: $MODE: /"
	SENT=$("$BIN/kafkatool" count --topic "$IN")

	start_a
	say "$MODE: relay A (pid $A_PID): Kafka $IN -> log topic $LOGTOPIC, consumer group strom-relay-$RUN-$MODE, $DELAY per record ${A_FLAGS[*]}"
	start_b
	say "$MODE: relay B (pid $B_PID): log topic $LOGTOPIC -> Kafka $BACK, positions in its $B_STATE, $B_DELAY per record"

	wait_relayed "$A_URL" $((SENT / 4))
	if [[ ${kills[0]} == A ]]; then kill_restart A; else wait_relayed "$B_URL" $((SENT / 6)); kill_restart B; fi
	wait_relayed "$B_URL" $((SENT / 3))
	kill_restart B

	say "$MODE: waiting for both relays to catch up"
	local deadline=$((SECONDS + 120)) back la lb
	while :; do
		back=$("$BIN/kafkatool" count --topic "$BACK")
		la=$(stat "$A_URL" lag)
		lb=$(stat "$B_URL" lag)
		if [[ $la == 0 && $lb == 0 ]] && ((back >= SENT)); then break; fi
		((SECONDS < deadline)) || fail "$MODE: not caught up within 120s: lag A $la, lag B $lb, $back of $SENT records back"
		sleep 0.2
	done

	echo
	echo "\$ kafkatool roundtrip --in $IN --out $BACK"
	local rt srcs
	rt=$("$BIN/kafkatool" roundtrip --in "$IN" --out "$BACK") || { echo "$rt"; fail "$MODE: the round trip lost, invented or reordered records"; }
	echo "$rt"
	echo "\$ kafkatool sources --topic $BACK"
	srcs=$("$BIN/kafkatool" sources --topic "$BACK")
	echo "$srcs"
	echo
	printf '%-8s %-14s %-8s %-15s %-4s %s\n' relay direction relayed deliveredAgain lag positions
	local r url dir
	for r in A B; do
		url=$A_URL dir=kafka-to-log
		[[ $r == B ]] && url=$B_URL dir=log-to-kafka
		printf '%-8s %-14s %-8s %-15s %-4s %s\n' "$r" "$dir" "$(stat "$url" relayed)" "$(stat "$url" deliveredAgain)" \
			"$(stat "$url" lag)" "$(stat "$url" positions | tr -d ' \n')"
	done
	say "(relayed and deliveredAgain count the current process of each relay, since its restart)"
	B_HANDED=$((B_HANDED + $(stat "$B_URL" relayed)))
	stop_relays

	local back_n dups b_dups
	back_n=$(sed -n 's/.*; \([0-9]*\) came back in .*/\1/p' <<<"$rt")
	dups=$(sed -n 's/.*, \([0-9]*\) duplicates,.*/\1/p' <<<"$rt")
	b_dups=$(sed -n 's/.*: \([0-9]*\) duplicates.*/\1/p' <<<"$srcs")
	[[ -n $back_n && -n $dups && -n $b_dups ]] || fail "$MODE: cannot read the counts from: $rt / $srcs"
	printf '%-14s %-5s %-5s %-16s %-8s %-7s %s\n' "$MODE" "$SENT" "$back_n" "$dups duplicates" "$b_dups" "${kills[*]}" "$B_HANDED" >>"$ROW_FILE"
	if [[ $MODE == exactly-once ]] && ((dups != 0)); then
		fail "$MODE: $dups duplicates in $BACK for a read_committed reader; want 0"
	fi
	say "$MODE: PASS: every line came back from Kafka through the log with its key, in order per key, through two kill -9s"
}

for mode in $MODES; do
	run_mode "$mode"
done

echo
echo "demo-relay: $SENT lines of $INPUT, Kafka -> relay A -> log -> relay B -> Kafka, two kill -9s per mode, read back read_committed:"
printf '%-14s %-5s %-5s %-16s %-8s %-7s %s\n' mode sent back duplicates "by B" killed "B handed to Kafka (at least)"
cat "$ROW_FILE"
say "(\"by B\": copies of one log record; \"B handed to Kafka\": records relay B's processes produced, beyond"
say " $SENT what it produced again after a kill -9: under exactly-once in transactions that were aborted, never seen)"
echo
say "PASS"
