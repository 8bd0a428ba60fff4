package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExactlyOnceFlags ensures --exactly-once makes log-to-kafka
// transactional without a --state folder, with the transactional id
// <group>-<from>-<to> unless --transactional-id (or its variable) names
// one, and that kafka-to-log and a transactional id without
// --exactly-once are refused with errors that say why.
func TestExactlyOnceFlags(t *testing.T) {
	t.Setenv("STROM_EXACTLY_ONCE", "")
	t.Setenv("STROM_TRANSACTIONAL_ID", "")
	base := []string{"--brokers", "b:9092", "--dir", "d", "--from", "mid", "--to", "back"}
	toKafkaArgs := append([]string{"--direction", toKafka}, base...)

	_, err := parseFlags(toKafkaArgs)
	require.ErrorContains(t, err, "--state", "at-least-once keeps its positions in --state")

	cfg, err := parseFlags(append(toKafkaArgs, "--exactly-once"))
	require.NoError(t, err)
	assert.True(t, cfg.eos)
	assert.Equal(t, "strom-relay-mid-back", cfg.txnID)

	cfg, err = parseFlags(append(toKafkaArgs, "--exactly-once", "--group", "g2"))
	require.NoError(t, err)
	assert.Equal(t, "g2-mid-back", cfg.txnID)

	t.Setenv("STROM_EXACTLY_ONCE", "true")
	t.Setenv("STROM_TRANSACTIONAL_ID", "relay-7")
	cfg, err = parseFlags(toKafkaArgs)
	require.NoError(t, err)
	assert.True(t, cfg.eos)
	assert.Equal(t, "relay-7", cfg.txnID)

	_, err = parseFlags(append([]string{"--direction", toLog}, base...))
	require.ErrorContains(t, err, `environment STROM_TRANSACTIONAL_ID="relay-7" (--transactional-id) is for log-to-kafka`)
	t.Setenv("STROM_TRANSACTIONAL_ID", "")
	cfg, err = parseFlags(append([]string{"--direction", toLog}, base...))
	require.NoError(t, err, "kafka-to-log --exactly-once commits in the log")
	assert.True(t, cfg.eos)
	assert.Empty(t, cfg.txnID, "kafka-to-log runs no Kafka transaction")
	t.Setenv("STROM_TRANSACTIONAL_ID", "relay-7")

	t.Setenv("STROM_EXACTLY_ONCE", "")
	_, err = parseFlags(append(toKafkaArgs, "--state", "s"))
	require.ErrorContains(t, err, `environment STROM_TRANSACTIONAL_ID="relay-7" (--transactional-id) is for --exactly-once`)

	t.Setenv("STROM_TRANSACTIONAL_ID", "")
	t.Setenv("STROM_EXACTLY_ONCE", "maybe")
	_, err = parseFlags(append(toKafkaArgs, "--state", "s"))
	require.ErrorContains(t, err, "STROM_EXACTLY_ONCE")
}

// TestBalancerRefusesEmptyEntries ensures an empty --balancer, or one with
// an empty entry, is refused naming --balancer, the value and the entry
// (service.Main exits 2 on it), and that spaces around a name are trimmed.
func TestBalancerRefusesEmptyEntries(t *testing.T) {
	t.Setenv("STROM_KAFKA_BALANCER", "")
	toLogArgs := []string{"--direction", toLog, "--brokers", "b:9092", "--dir", "d", "--from", "mid", "--to", "back"}
	for _, c := range []struct{ value, want string }{
		{"", `--balancer "": entry 1 of 1 is empty`},
		{"range,,sticky", `--balancer "range,,sticky": entry 2 of 3 is empty`},
		{"range,", `--balancer "range,": entry 2 of 2 is empty`},
		{" , range", `--balancer " , range": entry 1 of 2 is empty`},
	} {
		_, err := parseFlags(append(toLogArgs, "--balancer", c.value))
		require.ErrorContains(t, err, c.want, c.value)
	}
	cfg, err := parseFlags(append(toLogArgs, "--balancer", " range , sticky "))
	require.NoError(t, err)
	assert.Equal(t, []string{"range", "sticky"}, cfg.balancers)
}

// TestBadValuesFromTheEnvironmentNameTheVariable ensures a value an
// environment variable gave that the relay refuses is reported as that
// variable, environment STROM_X="..." (--flag), as one that does not parse
// is, and the same value given on the command line as the flag.
func TestBadValuesFromTheEnvironmentNameTheVariable(t *testing.T) {
	vars := []string{"STROM_KAFKA_BALANCER", "STROM_MAX_RECORD_BYTES", "STROM_ON_TOO_LARGE", "STROM_DEAD_LETTER",
		"STROM_EXACTLY_ONCE", "STROM_TRANSACTIONAL_ID", "STROM_DIRECTION", "STROM_BATCH", "STROM_DELAY",
		"STROM_KAFKA_TIMEOUT", "STROM_KAFKA_SESSION_TIMEOUT", "STROM_KAFKA_REBALANCE_TIMEOUT", "STROM_PARTITIONS"}
	base := []string{"--brokers", "b:9092", "--dir", "d", "--from", "mid", "--to", "back"}
	toKafkaArgs := append([]string{"--direction", toKafka, "--state", "s"}, base...)
	toLogArgs := append([]string{"--direction", toLog}, base...)
	for _, c := range []struct {
		args      []string
		env, val  string
		flag, msg string // the flag's form, and the rest of the message
	}{
		{toKafkaArgs, "STROM_ON_TOO_LARGE", "bogus", `--on-too-large "bogus"`, ": want fail, skip or dead-letter"},
		{toKafkaArgs, "STROM_MAX_RECORD_BYTES", "100", "--max-record-bytes 100", ": want 512"},
		{toKafkaArgs, "STROM_DEAD_LETTER", "mid.dlq", `--dead-letter "mid.dlq"`, " is for --on-too-large=dead-letter"},
		{toLogArgs, "STROM_KAFKA_BALANCER", "range,,sticky", `--balancer "range,,sticky"`, ": entry 2 of 3 is empty"},
		{toLogArgs, "STROM_KAFKA_BALANCER", "round-robin", `--balancer "round-robin"`, `: source: `},
		{toKafkaArgs, "STROM_KAFKA_BALANCER", "range", `--balancer "range"`, " is for kafka-to-log"},
		{toLogArgs, "STROM_ON_TOO_LARGE", "skip", `--on-too-large "skip"`, ": --max-record-bytes, --on-too-large and --dead-letter are for log-to-kafka"},
		{base, "STROM_DIRECTION", "sideways", `--direction "sideways"`, ": want kafka-to-log or log-to-kafka"},
		{toLogArgs, "STROM_BATCH", "0", "--batch 0", ": must be at least 1"},
		{toLogArgs, "STROM_DELAY", "-1s", "--delay -1s", ": must not be negative"},
		{toLogArgs, "STROM_KAFKA_TIMEOUT", "0s", "--timeout 0s", ": want more than 0"},
		{toLogArgs, "STROM_KAFKA_SESSION_TIMEOUT", "1ms", "--session-timeout 1ms", ": want at least 30ms"},
		{toLogArgs, "STROM_KAFKA_REBALANCE_TIMEOUT", "1s", "--rebalance-timeout 1s", ": want at least the session timeout"},
		{toLogArgs, "STROM_PARTITIONS", "0", "--partitions 0", ": want 1 to"},
	} {
		for _, v := range vars {
			t.Setenv(v, "")
		}
		t.Setenv(c.env, c.val)
		_, err := parseFlags(c.args)
		require.Error(t, err, c.env)
		assert.Contains(t, err.Error(), `environment `+c.env+`="`+c.val+`" (--`+strings.Fields(c.flag)[0][2:]+`)`+c.msg)

		t.Setenv(c.env, "")
		name := strings.Fields(c.flag)[0]
		_, err = parseFlags(append(c.args, name+"="+c.val))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), c.flag+c.msg)
		assert.NotContains(t, err.Error(), "environment")
	}
}
