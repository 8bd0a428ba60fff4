#!/usr/bin/env bash
# demo.sh: strom end to end, as separate OS processes sharing one log directory.
#
# It builds bin/publisher, bin/consumer and bin/check, starts a publisher writing keyed
# records into a 3-partition topic and three consumers (one per partition, each with its own
# checkpoint folder), waits until every consumer has saved a position, kills the one furthest
# along with kill -9, keeps publishing, restarts it on the same checkpoint folder, stops the
# publisher, waits for the consumers to catch up, runs `check split` and `check resumed`, and
# prints a table. It stops every process it started, also on failure, and exits non-zero when
# anything fails.
#
# Usage: scripts/demo.sh              (make demo)
#        INPUT=file.log KEY='regex' scripts/demo.sh
#                                     (make demo INPUT=... KEY=...: publish a file's lines,
#                                      keyed by the regex's first group)
# Environment:
#   STROM_DEMO_PORT  first of four ports: publisher, then consumers 0..2 (default 7070)
#   KEEP=1           keep the temporary log, checkpoints and service logs
#   CI=true          shorter pauses
#   RATE             publisher records/s (default 200)
#   DELAY            consumer handling time per record (default 2ms)
#   RUN              seconds everything runs before the kill (default 2, 1 with CI=true):
#                    RUN=120 leaves time to look at the consumers' live pages (/ui/)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
BIN=$ROOT/bin
BASE_PORT=${STROM_DEMO_PORT:-7070}
INPUT=${INPUT:-}
KEY=${KEY:-}
RATE=${RATE:-200}
DELAY=${DELAY:-2ms}
TOPIC=events
PARTITIONS=3
if [[ ${CI:-} == true || ${CI:-} == 1 ]]; then
	RUN_SECONDS=1  # how long everything runs before the kill
	DOWN_SECONDS=2 # how long the killed consumer stays down while the publisher writes
	AFTER_SECONDS=1
else
	RUN_SECONDS=2
	DOWN_SECONDS=3
	AFTER_SECONDS=2
fi
RUN_SECONDS=${RUN:-$RUN_SECONDS}
[[ $RUN_SECONDS =~ ^[0-9]+$ ]] || { printf 'demo: FAIL: RUN=%q: want whole seconds\n' "$RUN_SECONDS" >&2; exit 2; }

say() { printf 'demo: %s\n' "$*"; }
fail() {
	printf 'demo: FAIL: %s\n' "$*" >&2
	exit 1
}

[[ $BASE_PORT =~ ^[0-9]+$ ]] && ((BASE_PORT > 0 && BASE_PORT + PARTITIONS <= 65535)) ||
	fail "STROM_DEMO_PORT=$BASE_PORT: want a port number with room for the next $PARTITIONS"
if [[ -n $INPUT && ! -r $INPUT ]]; then
	fail "INPUT=$INPUT: not a readable file"
fi
if [[ -n $KEY && -z $INPUT ]]; then
	fail "KEY needs INPUT (make demo INPUT=path/to/file.log KEY='regex')"
fi

# Every port must be free before anything starts: a listener answering on one means another
# program (or an earlier demo) holds it.
PUB_PORT=$BASE_PORT
CONSUMER_PORTS=()
for ((p = 0; p < PARTITIONS; p++)); do CONSUMER_PORTS+=($((BASE_PORT + 1 + p))); done
for port in "$PUB_PORT" "${CONSUMER_PORTS[@]}"; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		fail "port $port is busy; the demo uses ports $BASE_PORT..$((BASE_PORT + PARTITIONS)), set STROM_DEMO_PORT to another first port"
	fi
done

say "building bin/publisher, bin/consumer, bin/check"
go build -o "$BIN/" ./examples/publisher ./examples/consumer ./examples/check

WORK=$(mktemp -d "${TMPDIR:-/tmp}/strom-demo.XXXXXX")
LOGDIR=$WORK/log
PUB_URL=http://127.0.0.1:$PUB_PORT
CONSUMER_URLS=()
for port in "${CONSUMER_PORTS[@]}"; do CONSUMER_URLS+=("http://127.0.0.1:$port"); done
CONSUMERS_CSV=$(
	IFS=,
	echo "${CONSUMER_URLS[*]}"
)
STARTED=() # every pid this script started
CONSUMER_PIDS=()
PUB_PID=

cleanup() {
	local rc=$? pid alive i
	trap - EXIT INT TERM
	for pid in "${STARTED[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for ((i = 0; i < 50; i++)); do
		alive=0
		for pid in "${STARTED[@]}"; do
			if kill -0 "$pid" 2>/dev/null; then alive=1; fi
		done
		((alive)) || break
		sleep 0.1
	done
	for pid in "${STARTED[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	if ((rc != 0)); then
		for f in "$WORK"/*.log; do
			[[ -f $f ]] || continue
			printf '\n--- %s (last lines) ---\n' "${f#"$WORK"/}" >&2
			tail -n 15 "$f" >&2
		done
	fi
	if [[ ${KEEP:-} == 1 ]]; then
		say "kept $WORK (log/, state-*/ and the services' *.log)"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# getstat URL PATH prints one value of a service's /stats ("null" for null).
getstat() { "$BIN/check" get "$1" "$2"; }

# wait_up NAME PID URL waits until the service answers /stats, failing if it exits first.
wait_up() {
	local name=$1 pid=$2 url=$3 deadline=$((SECONDS + 10))
	while ((SECONDS < deadline)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			fail "$name exited at startup: $(tail -n 3 "$WORK/$name.log")"
		fi
		if "$BIN/check" get "$url" name >/dev/null 2>&1 || "$BIN/check" get "$url" sent >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	fail "$name did not answer on $url within 10s"
}

# post URL PATH sends an empty POST with bash's /dev/tcp, so the demo needs no curl.
post() {
	local hostport=${1#http://} status
	exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}" || return 1
	printf 'POST %s HTTP/1.0\r\nHost: %s\r\nContent-Length: 0\r\n\r\n' "$2" "$hostport" >&3
	IFS= read -r status <&3 || status=
	exec 3<&-
	[[ $status == *" 200 "* ]] || fail "POST $1$2: ${status:-no answer}"
}

# get URL PATH prints the service's answer to GET PATH, headers and body, with
# bash's /dev/tcp (no curl): /metrics (Prometheus text), /ui/snapshot.json.
get() {
	local hostport=${1#http://}
	exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}" || return 1
	printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$hostport" >&3
	cat <&3
	exec 3<&-
}

start_publisher() {
	local args=(--dir "$LOGDIR" --topic "$TOPIC" --partitions "$PARTITIONS" --addr "127.0.0.1:$PUB_PORT" --rate "$RATE")
	if [[ -n $INPUT ]]; then args+=(--input "$INPUT"); fi
	if [[ -n $KEY ]]; then args+=(--key "$KEY"); fi
	"$BIN/publisher" "${args[@]}" >>"$WORK/publisher.log" 2>&1 &
	PUB_PID=$!
	STARTED+=("$PUB_PID")
	wait_up publisher "$PUB_PID" "$PUB_URL"
}

# start_consumer P starts the consumer of partition P on its state folder.
start_consumer() {
	local p=$1
	"$BIN/consumer" --dir "$LOGDIR" --topic "$TOPIC" --partition "$p" --state "$WORK/state-$p" \
		--addr "127.0.0.1:${CONSUMER_PORTS[p]}" --delay "$DELAY" >>"$WORK/consumer-$p.log" 2>&1 &
	CONSUMER_PIDS[p]=$!
	STARTED+=("$!")
	wait_up "consumer-$p" "$!" "${CONSUMER_URLS[p]}"
}

start_publisher
if [[ -n $INPUT ]]; then
	say "publisher (pid $PUB_PID) writes the lines of $INPUT${KEY:+ keyed by /$KEY/} at $RATE/s to topic $TOPIC ($PARTITIONS partitions) on $PUB_URL"
else
	say "publisher (pid $PUB_PID) writes synthetic user events keyed by user id at $RATE/s to topic $TOPIC ($PARTITIONS partitions) on $PUB_URL"
fi
for ((p = 0; p < PARTITIONS; p++)); do start_consumer "$p"; done
say "consumers of partitions 0..$((PARTITIONS - 1)) (pids ${CONSUMER_PIDS[*]}) handle each record in $DELAY, on ${CONSUMER_URLS[*]}"

# Wait until every consumer whose partition has records has saved a position above 0.
positions=()
deadline=$((SECONDS + 20))
while :; do
	ready=1
	for ((p = 0; p < PARTITIONS; p++)); do
		positions[p]=$(getstat "${CONSUMER_URLS[p]}" position)
		written=$(getstat "$PUB_URL" "nextOffset.$p")
		if ((written > 0)) && [[ ${positions[p]} == null || ${positions[p]} == 0 ]]; then ready=0; fi
	done
	((ready)) && break
	((SECONDS < deadline)) || fail "not every consumer saved a position within 20s (positions: ${positions[*]})"
	sleep 0.1
done
say "every consumer has a position: ${positions[*]}"
# Each consumer serves the live page of its pipeline (web.Pipeline) at /ui/.
for ((p = 0; p < PARTITIONS; p++)); do
	snap=$(get "${CONSUMER_URLS[p]}" /ui/snapshot.json) || snap=
	[[ $snap == "HTTP/1."?" 200 "* ]] || fail "consumer-$p's live page ${CONSUMER_URLS[p]}/ui/ does not answer: ${snap:0:200}"
	[[ $snap =~ \"running\":[[:space:]]*true ]] || fail "consumer-$p's live page says its pipeline is not running: ${snap:0:200}"
done
say "live pages, open one in a browser while the demo runs: ${CONSUMER_URLS[*]/%//ui/}"

say "letting them run for ${RUN_SECONDS}s"
sleep "$RUN_SECONDS"
for ((p = 0; p < PARTITIONS; p++)); do
	positions[p]=$(getstat "${CONSUMER_URLS[p]}" position)
	if [[ ${positions[p]} == null ]]; then positions[p]=-1; fi
done

# Kill the consumer furthest along, reading its position (LOW) just before and the
# partition's high watermark (BEFORE) just after.
victim=0
for ((p = 1; p < PARTITIONS; p++)); do
	if ((positions[p] > positions[victim])); then victim=$p; fi
done
LOW=$(getstat "${CONSUMER_URLS[victim]}" position)
if [[ $LOW == null || $LOW == 0 ]]; then
	fail "no consumer has saved a position to resume from (was anything published?)"
fi
# The shell's own stderr is muted around the kill: bash may report "Killed" for the job.
exec 4>&2 2>/dev/null
kill -KILL "${CONSUMER_PIDS[victim]}"
wait "${CONSUMER_PIDS[victim]}" || true
exec 2>&4 4>&-
BEFORE=$(getstat "$PUB_URL" "nextOffset.$victim")
say "kill -9 consumer-$victim (pid ${CONSUMER_PIDS[victim]}) at position $LOW (LOW); partition $victim high watermark right after: $BEFORE (BEFORE)"

say "publishing for ${DOWN_SECONDS}s more while consumer-$victim is down"
sleep "$DOWN_SECONDS"
start_consumer "$victim"
say "restarted consumer-$victim (pid ${CONSUMER_PIDS[victim]}) on the same state folder; resumedFrom $(getstat "${CONSUMER_URLS[victim]}" resumedFrom)"
sleep "$AFTER_SECONDS"

if [[ -n $INPUT ]]; then
	# A file is published to its end: the publisher stops by itself after the last line.
	deadline=$((SECONDS + 120))
	while :; do
		[[ $(getstat "$PUB_URL" stopped) == true ]] && break
		((SECONDS < deadline)) || fail "the publisher did not reach the end of $INPUT within 120s"
		sleep 0.1
	done
	say "the publisher reached the end of $INPUT after $(getstat "$PUB_URL" sent) records; waiting for the consumers to catch up"
else
	post "$PUB_URL" /stop
	say "stopped the publisher (POST /stop) after $(getstat "$PUB_URL" sent) records; waiting for the consumers to catch up"
fi

failed=0
echo
echo "\$ check split --publisher $PUB_URL --consumers $CONSUMERS_CSV"
"$BIN/check" split --publisher "$PUB_URL" --consumers "$CONSUMERS_CSV" --wait 30s || failed=1
echo
echo "\$ check resumed $BEFORE --consumer ${CONSUMER_URLS[victim]} --at-least $LOW"
"$BIN/check" resumed "$BEFORE" --consumer "${CONSUMER_URLS[victim]}" --at-least "$LOW" || failed=1
echo
"$BIN/check" table --publisher "$PUB_URL" --consumers "$CONSUMERS_CSV" || failed=1
echo
# The consumers' OpenTelemetry metrics, as Prometheus scrapes them (see the README's "Metrics").
echo "\$ curl -s ${CONSUMER_URLS[0]}/metrics | grep -E '^strom_(partition|checkpoint_saves)'"
scrape=$(get "${CONSUMER_URLS[0]}" /metrics | grep -E '^strom_(partition|checkpoint_saves)' | sed -E 's/,?otel_scope_[a-z_]+="[^"]*"//g')
if [[ $scrape == *strom_partition_position* ]]; then
	echo "$scrape"
else
	echo "demo: FAIL: consumer-0's /metrics has no strom_partition_position" >&2
	failed=1
fi
echo
if ((failed)); then
	fail "a check failed (see above)"
fi
say "PASS: every record written was handled and checkpointed; consumer-$victim resumed from its checkpoint after kill -9"
