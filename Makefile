SHELL := /bin/bash
# strom: make demo, make test (see README.md).
#
#   make demo                                   the end-to-end demo on synthetic events
#   make demo-relay                             Kafka -> log -> Kafka through two relays killed -9 twice, at-least-once then
#                                               exactly-once (relay B --exactly-once): prints each mode's duplicates, 0 for exactly-once
#   make demo-sshwatch [INPUT=sshd.log]         failed SSH logins per IP per minute, uninterrupted and killed -9
#   make demo-scale [INPUT=sshd.log]            sshwatch on 3 processes of a Kafka group (in-process Kafka), one killed -9,
#                                               a fourth added: the alerts must equal one process's (FLAGS=--repartition ...)
#   make demo INPUT=file.log KEY='regex'        the demo on the lines of a file
#   make test                                   go vet + every test with the race detector (under 3 minutes on 2 cores)
#   make soak                                   the log's long loops at full strength (STROM_SOAK=1): the follow
#                                               wake-up race 50,000 times, the synced appender killed 200 times and the
#                                               group appender (1,000 records of 1 KiB per call) 100 times, per mode
#   make torture [TORTURE_KILLS=300]            a publisher and three consumers (or relays to Kafka and back) as processes, kill -9ed at random
#                                               TORTURE_KILLS times per scenario (plain handler; parallel filter/map/tap pipeline; relay;
#                                               relay-eos: the log -> Kafka relay --exactly-once, each record once for read_committed readers),
#                                               then checked for loss, unhandled records and positions past unfinished ones (about 2.5
#                                               minutes on 2 cores, 40 s more for relay-eos); then scenario slow: a 1 ms-a-record consumer of 5,000 records, kill -9ed
#                                               every 0.2 to 1 s, must reach the end within 100 kills (--slow-kills), and its first
#                                               checkpoint with a 2 ms handler is timed; then scenario scale: a windowed count on 12 Kafka
#                                               partitions by worker processes of one group joining, leaving and kill -9ed (1, 3, 2, 3 workers,
#                                               3 kills), every (window, key) checked against counts computed apart (about 12 s);
#                                               then scenarios eos-log and eos-kafka-log (issue 19): a log -> Aggregate -> log pipeline,
#                                               and a Kafka group member copying into the log, under stream.ExactlyOnce in a worker
#                                               process kill -9ed TORTURE_KILLS times at seeded moments: every result must be in the output
#                                               once (0 lost, 0 duplicated, 0 out of order); then
#                                               scenario eos-kafka: TORTURE_EOS_KAFKA_SEEDS (200) seeded fault runs of a Kafka -> window -> Kafka
#                                               pipeline under stream.ExactlyOnce on worker processes, each with 3 to 5 faults (kill -9,
#                                               kill -9 with the commit held at the broker, a member joining or leaving, Produce, EndTxn,
#                                               TxnOffsetCommit and Heartbeat answered with errors, dropped or delayed), the output read
#                                               read_committed: 0 lost, 0 duplicated, 0 out of order (8 seeds at a time: about 2 minutes);
#                                               TORTURE_FLAGS adds flags (--seed N --scenarios slow --keep)
#   make torture TORTURE_FLAGS='--scenarios eos-kafka --seed 17 --eos-kafka-seeds 1 --keep'
#                                               one seed of scenario eos-kafka alone, its run folder kept (a failing seed prints this command)
#   make torture-soak [TORTURE_SOAK_SEEDS=1000] scenario eos-kafka's fault runs alone, TORTURE_SOAK_SEEDS seeds (about 10 minutes on 2 cores)
#   make torture TORTURE_FLAGS='--scenarios scale --seed 17'
#                                               issue 18's churn case: a windowed count on worker processes of a Kafka group (in-process
#                                               kfake) that join and leave (1, 3, 2, 3) and are kill -9ed; every window's count checked
#                                               (add --stateless: records relayed, each must arrive)
#   make fuzz [FUZZTIME=10s]                    every fuzz target (log, checkpoint, sink decoders) for FUZZTIME, one after another (scripts/fuzz.sh);
#                                               make fuzz FUZZTIME=10m for the long runs, FUZZFLAGS=-parallel=1 on a shared machine,
#                                               TMPDIR=/dev/shm to spare the disk the recovery targets' fsyncs
#   make bench [BENCHTIME=1s] [ROUNDS=5]        the log's, the pipeline's (internal/bench) and the strom command's (cmd/strom) benchmarks as one table
#                                               with ratios to baselines of the same run: each compared side in a process of its own, after a
#                                               sync, or both taking turns in one process (of 200 ms: appends, pipelines in memory, compacted appends, relay; Kafka window),
#                                               for ROUNDS rounds (A B, A B, ...), the verdict on the median ratio,
#                                               its spread (lowest to highest) beside it, the machine at the top (raw output: bench.out;
#                                               about 30 minutes on 2 cores; BENCH_ONLY=name runs the families whose name contains it, case matters)
#   make nexmark [NEXMARK_EVENTS=5000000]       the Nexmark queries built so far (q0-q5, q7, q8, q9, q11, q12) over NEXMARK_EVENTS generated events read
#                                               from the log (read-only, checkpoints every 200 ms to a FileStore): a table of events/s (wall),
#                                               CPU s per million events, events/s per core, Flink 1.13's per-core figure and the ratio; and
#                                               go-streams' q0, q1, q2 and q12 over the same events beside strom's
#                                               (examples/nexmark; about a minute on 2 cores, about 0.9 GB of temporary files at the default)
#   make lint                                   gofmt + go vet
#   make build                                  compile everything; the services into bin/

GO        ?= go
BENCHTIME ?= 1s
ROUNDS    ?= 5
BENCH_ONLY ?=
FUZZTIME  ?= 10s
FUZZFLAGS ?=
# The recovery targets run about 50 inputs a second (each opens a log:
# files, fsyncs), and go test spends up to a minute (its default) minimizing
# every new interesting input, without counting those runs as execs: 5s
# leaves most of FUZZTIME to new inputs.
FUZZMINIMIZETIME ?= 5s

# The fuzz targets, as package:Target. go test -fuzz takes one target per
# package per run, so make fuzz runs them one after another. Their seed
# corpora (f.Add and testdata/fuzz/<Target>/) run in make test as plain tests.
FUZZ_TARGETS ?= log:FuzzDecodeBody log:FuzzRecoverSegment log:FuzzSealedSegmentIndex log:FuzzSealMarker \
	log:FuzzParseEpochs log:FuzzLoadRecoveryPoint log:FuzzLoadTopicMeta log:FuzzKafkaPartition \
	checkpoint:FuzzDecodePosition checkpoint:FuzzReadState internal/txnfile:FuzzDecodeTransactionFile

# make torture: kills per scenario (plain, pipeline, relay, relay-eos; slow has its own
# budget, --slow-kills 100), and extra flags for internal/cmd/torture
# (--seed N, --scenarios, --modes, --keep, --dir, --slow-kills).
TORTURE_KILLS ?= 300
TORTURE_FLAGS ?=
# make torture: scenario eos-kafka's seeds; make torture-soak: its seeds alone.
TORTURE_EOS_KAFKA_SEEDS  ?= 200
TORTURE_SOAK_SEEDS ?= 1000

# The tests whose loops STROM_SOAK=1 raises (log/soak_test.go); make test runs
# them with smaller counts, make soak runs only them, at full strength.
SOAK_TESTS ?= ^(TestFollowNeverLosesAWakeUp|TestKilledSyncedAppenderKeepsEveryAckedRecord|TestKilledGroupAppenderLeavesATornTailNeverCorruption|TestCompactionKilledAtEachFileOperation|TestCompactionBesideAppendsFollowersAndTruncateUnderTheRaceDetector)$$

# The demo reads INPUT, KEY, KEEP, RATE, DELAY, CI and STROM_DEMO_PORT from its environment;
# make passes variables given on its command line (make demo INPUT=...) to it there.

# make nexmark: the events generated (persons, auctions and bids together); every
# query reads the same stream.
NEXMARK_EVENTS ?= 5000000

.PHONY: demo demo-relay demo-sshwatch demo-scale test soak torture torture-soak fuzz bench nexmark screenshots lint build

demo:
	@./scripts/demo.sh

demo-relay:
	@./scripts/demo-relay.sh

demo-sshwatch:
	@./examples/sshwatch/demo.sh

demo-scale:
	@./scripts/demo-scale.sh

test:
	$(GO) vet ./... && $(GO) test -race ./...

# -count=1: a soak is run for its repetitions, never answered from the test cache.
soak:
	STROM_SOAK=1 $(GO) test -race -count=1 -timeout 30m -v -run '$(SOAK_TESTS)' ./log/

# The supervisor is built without the race detector, so the children run at
# full speed; internal/torture's own test runs a short version under -race.
# Scenario relay runs bin/relay, found beside bin/torture.
torture:
	$(GO) build -o bin/ ./internal/cmd/torture ./examples/relay
	./bin/torture --kills $(TORTURE_KILLS) --eos-kafka-seeds $(TORTURE_EOS_KAFKA_SEEDS) $(TORTURE_FLAGS)

# Scenario eos-kafka's seeded fault runs alone, TORTURE_SOAK_SEEDS of them.
torture-soak:
	$(GO) build -o bin/ ./internal/cmd/torture
	./bin/torture --scenarios eos-kafka --eos-kafka-seeds $(TORTURE_SOAK_SEEDS) $(TORTURE_FLAGS)
# A finding fails the run and go test writes the input to
# <package>/testdata/fuzz/<Target>/, where it stays a regression test.
fuzz:
	@GO="$(GO)" FUZZ_TARGETS="$(FUZZ_TARGETS)" FUZZTIME="$(FUZZTIME)" FUZZMINIMIZETIME="$(FUZZMINIMIZETIME)" FUZZFLAGS="$(FUZZFLAGS)" ./scripts/fuzz.sh

# internal/cmd/benchtable -run builds the test binaries of ./log/,
# ./internal/bench/ and ./cmd/strom/ and runs each benchmark family's sides
# in processes of their own, interleaved (its package doc, and
# docs/benchmarks.md, say why); -benchmem gives every figure its allocs/op.
# `go run ./internal/cmd/benchtable < bench.out` prints the table again.
bench:
	@GO="$(GO)" $(GO) run ./internal/cmd/benchtable -run -rounds $(ROUNDS) -benchtime $(BENCHTIME) -only '$(BENCH_ONLY)' -out bench.out

# The command is built first, so the table times the queries, not the compiler.
nexmark:
	$(GO) build -o bin/ ./examples/nexmark
	./bin/nexmark --query all --events $(NEXMARK_EVENTS) --table --gostreams

# The README's screenshots of the live pages, taken by the browser tests
# (needs chromium: apt-get install chromium).
screenshots:
	STROM_SCREENSHOTS=$(CURDIR)/docs/img $(GO) test -count=1 -run 'InABrowser' ./web/

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt: these files need gofmt -w:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

build:
	$(GO) build ./...
	$(GO) build -o bin/ ./examples/publisher ./examples/consumer ./examples/check ./examples/relay ./examples/projection ./examples/sshwatch ./internal/cmd/kafkatool ./internal/cmd/demoscale ./cmd/strom
