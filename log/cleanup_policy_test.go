package log_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// TestCompactedTopicRefusesARecordWithoutAKey ensures an append to a topic
// of cleanup policy compact with a record of nil key fails with a
// *KeyRequiredError naming the record, appends nothing of its batch, and
// that an empty (non-nil) key and a tombstone (nil value) are accepted, as
// Kafka's broker does.
func TestCompactedTopicRefusesARecordWithoutAKey(t *testing.T) {
	lg := openLog(t, t.TempDir(), log.WithRetentionCheckInterval(0))
	tp, err := lg.CreateTopic("users", 1, log.WithCleanupPolicy(log.CleanupCompact))
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	ctx := context.Background()

	_, err = p.Append(ctx, log.Record{Key: []byte("a"), Value: val(0)}, log.Record{Value: val(1)})
	require.ErrorIs(t, err, log.ErrKeyRequired)
	var ke *log.KeyRequiredError
	require.True(t, errors.As(err, &ke))
	assert.Equal(t, log.KeyRequiredError{Topic: "users", Partition: 0, Index: 1}, *ke)
	assert.ErrorContains(t, err, "topic users partition 0: record 1 of the batch has no key")
	assert.EqualValues(t, 0, p.HighWatermark(), "nothing of the batch was appended")

	_, _, err = tp.Append(ctx, log.Record{Value: val(2)})
	require.ErrorIs(t, err, log.ErrKeyRequired, "through the topic (round-robin partition) too")

	off, err := p.Append(ctx, log.Record{Key: []byte{}, Value: val(3)}, log.Record{Key: []byte("a")})
	require.NoError(t, err, "an empty key is a key; a nil value is a tombstone")
	assert.EqualValues(t, 0, off)
}

// TestCleanupPolicyIsStoredChangedAndSurvivesReopen ensures the policy is
// written to topic.json in Kafka's spelling, read back at reopen (also by a
// read-only log), replaced by CreateTopic of the existing topic, and that a
// topic made delete again accepts records without a key.
func TestCleanupPolicyIsStoredChangedAndSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	meta := filepath.Join(dir, "users", "topic.json")
	lg := openLog(t, dir, log.WithRetentionCheckInterval(0))
	tp, err := lg.CreateTopic("users", 2, log.WithCleanupPolicy(log.CleanupCompactDelete))
	require.NoError(t, err)
	assert.Equal(t, log.CleanupCompactDelete, tp.CleanupPolicy())
	b, err := os.ReadFile(meta)
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":1,"name":"users","partitions":2,"cleanupPolicy":"compact,delete","id":"`+tp.ID().String()+`"}`, string(b))
	require.NoError(t, lg.Close())

	ro := openLog(t, dir, log.ReadOnly())
	rt, err := ro.Topic("users")
	require.NoError(t, err)
	assert.Equal(t, log.CleanupCompactDelete, rt.CleanupPolicy(), "a read-only log reads it")

	lg = openLog(t, dir, log.WithRetentionCheckInterval(0))
	tp, err = lg.WriteTopic("users")
	require.NoError(t, err)
	assert.Equal(t, log.CleanupCompactDelete, tp.CleanupPolicy(), "the policy survives reopening")
	_, _, err = tp.Append(context.Background(), log.Record{Value: val(0)})
	require.ErrorIs(t, err, log.ErrKeyRequired)

	_, err = lg.CreateTopic("users", 2, log.WithCleanupPolicy(log.CleanupDelete))
	require.NoError(t, err)
	assert.Equal(t, log.CleanupDelete, tp.CleanupPolicy())
	b, err = os.ReadFile(meta)
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":1,"name":"users","partitions":2,"id":"`+tp.ID().String()+`"}`, string(b), "delete is the absent field")
	_, _, err = tp.Append(context.Background(), log.Record{Value: val(1)})
	require.NoError(t, err, "delete again: no key needed")

	_, err = lg.CreateTopic("other", 1, log.WithCleanupPolicy(log.CleanupPolicy(9)))
	require.ErrorContains(t, err, "invalid cleanup policy 9")

	assert.Equal(t, 24*time.Hour, tp.TombstoneRetention(), "Kafka's delete.retention.ms default")
	_, err = lg.CreateTopic("users", 2, log.TombstoneRetention(90*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, 90*time.Minute, tp.TombstoneRetention())
	b, err = os.ReadFile(meta)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"deleteRetentionMs":5400000`)
	_, err = lg.CreateTopic("other", 1, log.TombstoneRetention(-time.Second))
	require.ErrorContains(t, err, "tombstone retention -1000 ms is negative")
}

// TestTopicJSONCleanupPolicyIsChecked ensures a topic.json of an unknown
// cleanup policy is ErrCorruptMetadata naming it, and that "delete"
// (which this version writes as the absent field) reads as delete.
func TestTopicJSONCleanupPolicyIsChecked(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir, log.WithRetentionCheckInterval(0))
	_, err := lg.CreateTopic("users", 1)
	require.NoError(t, err)
	require.NoError(t, lg.Close())
	meta := filepath.Join(dir, "users", "topic.json")
	require.NoError(t, os.WriteFile(meta, []byte(`{"version":1,"name":"users","partitions":1,"cleanupPolicy":"delete"}`+"\n"), 0o644))
	lg = openLog(t, dir, log.WithRetentionCheckInterval(0))
	tp, err := lg.Topic("users")
	require.NoError(t, err, "delete written by hand is delete")
	assert.Equal(t, log.CleanupDelete, tp.CleanupPolicy())
	require.NoError(t, lg.Close())
	for _, bad := range []string{"shrink", "Delete", "compact,compact,delete"} {
		require.NoError(t, os.WriteFile(meta, []byte(`{"version":1,"name":"users","partitions":1,"cleanupPolicy":"`+bad+`"}`+"\n"), 0o644))
		lg = openLog(t, dir, log.WithRetentionCheckInterval(0))
		_, err = lg.Topic("users")
		require.ErrorIs(t, err, log.ErrCorruptMetadata, bad)
		assert.ErrorContains(t, err, `cleanup policy "`+bad+`"`)
		require.NoError(t, lg.Close())
	}
}

// TestParseCleanupPolicyReadsKafkasValues ensures ParseCleanupPolicy reads
// Kafka's cleanup.policy values in either order and String writes them back.
func TestParseCleanupPolicyReadsKafkasValues(t *testing.T) {
	for in, want := range map[string]log.CleanupPolicy{
		"delete": log.CleanupDelete, "compact": log.CleanupCompact,
		"compact,delete": log.CleanupCompactDelete, "delete, compact": log.CleanupCompactDelete,
	} {
		got, err := log.ParseCleanupPolicy(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, c := range []log.CleanupPolicy{log.CleanupDelete, log.CleanupCompact, log.CleanupCompactDelete} {
		got, err := log.ParseCleanupPolicy(c.String())
		require.NoError(t, err)
		assert.Equal(t, c, got)
	}
	for _, bad := range []string{"", "compacted", "compact;delete", "compact,"} {
		_, err := log.ParseCleanupPolicy(bad)
		assert.ErrorContains(t, err, "unknown cleanup policy", bad)
	}
}
