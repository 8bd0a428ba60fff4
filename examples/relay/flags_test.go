package main

import (
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
	require.ErrorContains(t, err, "--transactional-id is for log-to-kafka")
	t.Setenv("STROM_TRANSACTIONAL_ID", "")
	cfg, err = parseFlags(append([]string{"--direction", toLog}, base...))
	require.NoError(t, err, "kafka-to-log --exactly-once commits in the log")
	assert.True(t, cfg.eos)
	assert.Empty(t, cfg.txnID, "kafka-to-log runs no Kafka transaction")
	t.Setenv("STROM_TRANSACTIONAL_ID", "relay-7")

	t.Setenv("STROM_EXACTLY_ONCE", "")
	_, err = parseFlags(append(toKafkaArgs, "--state", "s"))
	require.ErrorContains(t, err, "--transactional-id is for --exactly-once")

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
