package log_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/strom-dev/strom/log"
)

// TestTopicNamesFollowKafkaRule ensures names that could leave the log
// directory, or break Kafka's rule, are refused with a message naming the
// fault, and create nothing.
func TestTopicNamesFollowKafkaRule(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	for name, want := range map[string]string{
		"../x":                   `character '/'`,
		"":                       "empty name",
		".":                      `"." is not allowed`,
		"..":                     `".." is not allowed`,
		"a b":                    `character ' '`,
		strings.Repeat("a", 250): "250 bytes long, the limit is 249",
	} {
		_, err := lg.CreateTopic(name, 1)
		require.ErrorIs(t, err, log.ErrInvalidTopic, name)
		assert.Contains(t, err.Error(), want)
		_, err = lg.Topic(name)
		require.ErrorIs(t, err, log.ErrInvalidTopic, name)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
	_, err = lg.CreateTopic(strings.Repeat("a", 249)+"", 1)
	require.NoError(t, err)
	_, err = lg.CreateTopic("Ok.name_with-dashes.1", 1)
	require.NoError(t, err)
}

// TestPartitionOutOfRangeIsAnError ensures a partition number outside the
// topic's count is refused with both numbers.
func TestPartitionOutOfRangeIsAnError(t *testing.T) {
	lg := openLog(t, t.TempDir())
	tp, err := lg.CreateTopic("events", 3)
	require.NoError(t, err)
	for _, p := range []int32{-1, 3, 100} {
		_, err := tp.Partition(p)
		require.ErrorIs(t, err, log.ErrPartitionOutOfRange)
		assert.Contains(t, err.Error(), fmt.Sprintf("partitions 0 to 2, asked for %d", p))
	}
	_, err = lg.CreateTopic("events", 4)
	require.ErrorIs(t, err, log.ErrTopicExists)
	_, err = lg.CreateTopic("other", 0)
	require.ErrorIs(t, err, log.ErrInvalidPartitions)
}

// TestRecordLargerThanSegmentIsRefused ensures a record that cannot fit a
// segment fails with both sizes and leaves what is stored intact.
func TestRecordLargerThanSegmentIsRefused(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		lg := openLog(t, t.TempDir(), log.WithMode(mode), log.WithSegmentBytes(1024))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 3)
		_, err := p.Append(context.Background(), log.Record{Value: make([]byte, 2000)})
		require.ErrorIs(t, err, log.ErrRecordTooLarge)
		var te *log.RecordTooLargeError
		require.True(t, errors.As(err, &te))
		assert.EqualValues(t, 1024, te.SegmentBytes)
		assert.EqualValues(t, 2048, te.FrameBytes)
		assert.Contains(t, err.Error(), "record needs 2048 bytes but a segment holds 1024 bytes")
		assert.EqualValues(t, 3, p.HighWatermark())
		assert.Len(t, readAll(t, p), 3)
	})
}

// TestEmptyValueAndNilKeyAreLegal ensures a tombstone (empty value) and a
// record with no key round-trip, and that nil and empty keys stay distinct.
func TestEmptyValueAndNilKeyAreLegal(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		lg := openLog(t, t.TempDir(), log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		in := []log.Record{
			{Key: nil, Value: []byte{}},
			{Key: []byte{}, Value: nil},
			{Key: []byte("k"), Value: []byte("v"), Timestamp: 1234,
				Headers: []log.Header{{Key: "a", Value: []byte("1")}, {Key: "a", Value: nil}, {Key: "", Value: []byte{}}}},
		}
		_, err := p.Append(context.Background(), in...)
		require.NoError(t, err)
		out := readAll(t, p)
		require.Len(t, out, 3)
		assert.Nil(t, out[0].Key)
		assert.NotNil(t, out[0].Value)
		assert.Empty(t, out[0].Value)
		assert.NotNil(t, out[1].Key)
		assert.Nil(t, out[1].Value)
		assert.Equal(t, in[2].Headers, out[2].Headers)
		assert.EqualValues(t, 1234, out[2].Timestamp)
		assert.NotZero(t, out[0].Timestamp, "a zero timestamp becomes now")
	})
}

// TestAppendThroughReadOnlyFails ensures every write through a read-only
// log is ErrReadOnly and changes nothing.
func TestAppendThroughReadOnlyFails(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	p := openPartition(t, lg, "events", 1)
	appendN(t, p, 0, 2)

	ro := openLog(t, dir, log.ReadOnly())
	tp, err := ro.Topic("events")
	require.NoError(t, err)
	_, _, err = tp.Append(context.Background(), log.Record{Value: []byte("x")})
	require.ErrorIs(t, err, log.ErrReadOnly)
	rp, err := tp.Partition(0)
	require.NoError(t, err)
	_, err = rp.Append(context.Background(), log.Record{Value: []byte("x")})
	require.ErrorIs(t, err, log.ErrReadOnly)
	require.ErrorIs(t, rp.Truncate(0), log.ErrReadOnly)
	_, err = ro.CreateTopic("new", 1)
	require.ErrorIs(t, err, log.ErrReadOnly)
	assert.EqualValues(t, 2, rp.HighWatermark())
	assert.EqualValues(t, 2, p.HighWatermark())
}

// TestUnknownTopicIsAnError ensures opening a topic never created fails
// with ErrUnknownTopic, read-only too, even in an empty directory (a
// missing one fails Open: TestOpenOfMissingDirectoryFailsWithErrNoLogAndCreatesNothing).
func TestUnknownTopicIsAnError(t *testing.T) {
	lg := openLog(t, t.TempDir())
	_, err := lg.Topic("nope")
	require.ErrorIs(t, err, log.ErrUnknownTopic)
	ro := openLog(t, t.TempDir(), log.ReadOnly())
	_, err = ro.Topic("nope")
	require.ErrorIs(t, err, log.ErrUnknownTopic)
}

// TestSecondWriterInSameProcessIsLocked ensures two read-write opens of one
// topic cannot both write.
func TestSecondWriterInSameProcessIsLocked(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	_, err := lg.CreateTopic("events", 1)
	require.NoError(t, err)
	lg2 := openLog(t, dir)
	_, err = lg2.WriteTopic("events")
	require.ErrorIs(t, err, log.ErrLocked)
	var le *log.LockedError
	require.True(t, errors.As(err, &le))
	assert.Equal(t, os.Getpid(), le.PID)
	_, err = lg2.CreateTopic("other", 1)
	require.NoError(t, err, "another topic of the same directory is free")
}

// TestCloseReleasesTheLockWhileAForkedChildHoldsACopyOfItsDescriptor
// ensures Close frees a topic's writer lock even while another descriptor
// of the same open file exists, as in a child this process forks at that
// moment (any exec.Command) until its exec closes it: a reopen for writing
// right after Close succeeds instead of failing as locked by this very
// process. The copy is made here with dup, deterministically.
func TestCloseReleasesTheLockWhileAForkedChildHoldsACopyOfItsDescriptor(t *testing.T) {
	dir := t.TempDir()
	lg, err := log.Open(dir)
	require.NoError(t, err)
	tp, err := lg.CreateTopic("events", 1)
	require.NoError(t, err)
	lock := log.LockFile(tp)
	require.NotNil(t, lock)
	child, err := unix.Dup(int(lock.Fd())) // the forked child's copy
	require.NoError(t, err)
	defer unix.Close(child)
	require.NoError(t, lg.Close())

	_, err = openLog(t, dir).WriteTopic("events")
	require.NoError(t, err, "the lock outlived Close in a descriptor copy")
}

// TestSecondWritingProcessIsLockedWithPid ensures a second process opening
// the same topic for writing is refused, and the error names the holder's
// pid; after the holder exits the lock is free.
func TestSecondWritingProcessIsLockedWithPid(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	p := openPartition(t, lg, "events", 1)
	appendN(t, p, 0, 1)

	out, err := helperProcess(t, "lock", dir).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "locked for writing by pid "+fmt.Sprint(os.Getpid()))
	assert.EqualValues(t, 1, p.HighWatermark(), "nothing stored was lost")

	require.NoError(t, lg.Close())
	out, err = helperProcess(t, "lock", dir).CombinedOutput()
	require.NoError(t, err, string(out))
}

// helperProcess re-executes the test binary as a child process running
// TestHelperProcess with the given role.
func helperProcess(t *testing.T, role string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "STROM_HELPER_ROLE="+role, "STROM_HELPER_ARGS="+strings.Join(args, "|"))
	return cmd
}

// TestHelperProcess is not a test: it is the body of the child processes
// started by helperProcess.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv("STROM_HELPER_ROLE")
	if role == "" {
		return
	}
	args := strings.Split(os.Getenv("STROM_HELPER_ARGS"), "|")
	code := 0
	switch role {
	case "lock":
		lg, err := log.Open(args[0])
		if err == nil {
			_, err = lg.WriteTopic("events")
		}
		if err != nil {
			fmt.Println(err)
			code = 1
		}
	case "append":
		// append N records, one every few ms, to topic events partition 0
		lg, err := log.Open(args[0])
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		tp, err := lg.Topic("events")
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		p, _ := tp.Partition(0)
		var n int
		fmt.Sscan(args[1], &n)
		for i := range n {
			if _, err := p.Append(context.Background(), log.Record{Value: fmt.Appendf(nil, "%d", time.Now().UnixNano()), Key: fmt.Append(nil, i)}); err != nil {
				fmt.Println(err)
				os.Exit(1)
			}
			time.Sleep(3 * time.Millisecond)
		}
		lg.Close()
	}
	os.Exit(code)
}

// TestTopicMetadataEditsAreCorruption ensures a topic.json that does not
// parse completely, or whose partition count was edited below the folders
// on disk, fails the open naming the file, instead of ignoring records.
func TestTopicMetadataEditsAreCorruption(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	p := openPartition(t, lg, "events", 3)
	appendN(t, p, 0, 1)
	require.NoError(t, lg.Close())
	meta := dir + "/events/topic.json"
	for content, want := range map[string]string{
		`{"version":1,"name":"events","partitions":2}`:         "says 2 partitions but folder",
		`{"version":1,"name":"events","partitions":3} garbage`: "unexpected bytes",
		`{"version":1,"name":"other","partitions":3}`:          `name "other"`,
		``: "EOF",
	} {
		require.NoError(t, os.WriteFile(meta, []byte(content), 0o644))
		ro := openLog(t, dir, log.ReadOnly())
		_, err := ro.Topic("events")
		require.ErrorIs(t, err, log.ErrCorrupt, content)
		assert.Contains(t, err.Error(), want)
		assert.Contains(t, err.Error(), meta)
	}
}

// TestReplayFromAboveTheEndIsOutOfRange ensures a replay asked to start
// past the high watermark says so instead of ending quietly.
func TestReplayFromAboveTheEndIsOutOfRange(t *testing.T) {
	lg := openLog(t, t.TempDir())
	p := openPartition(t, lg, "events", 1)
	appendN(t, p, 0, 3)
	_, err := p.Replay(10).Next(context.Background(), 0)
	require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
	_, err = p.Replay(3).Next(context.Background(), 0)
	require.ErrorIs(t, err, io.EOF)
}

// TestTopicNameErrorNamesNonASCIICharacter ensures the error shows the
// character as written, not one of its UTF-8 bytes.
func TestTopicNameErrorNamesNonASCIICharacter(t *testing.T) {
	err := log.ValidateTopicName("grün")
	require.ErrorIs(t, err, log.ErrInvalidTopic)
	assert.Contains(t, err.Error(), `'ü' at byte 2`)
}
