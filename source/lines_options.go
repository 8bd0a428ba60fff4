package source

import (
	"time"

	"github.com/strom-dev/strom/checkpoint"
)

// LinesOption configures a [LinesSource]; pass options to [Lines].
type LinesOption interface {
	applyLines(*linesConfig)
}

// linesConfig holds a LinesSource's settings; defaultLinesConfig lists every
// default.
type linesConfig struct {
	topic     string                  // LinesTopic; "" means derived from the file name
	maxLines  int                     // MaxLines
	follow    bool                    // Follow
	interval  time.Duration           // FollowInterval
	onChange  FileChangePolicy        // OnFileChange
	onChanged func(*FileChangedError) // OnFileChanged; nil: no hook
	store     checkpoint.Store        // LinesFromStore; nil: none
	keepCR    bool                    // KeepCR
}

func defaultLinesConfig() linesConfig {
	return linesConfig{maxLines: DefaultMaxLines, interval: DefaultFollowInterval, onChange: FileChangeRestart}
}

// linesOptionFunc adapts a closure to LinesOption.
type linesOptionFunc func(*linesConfig)

func (f linesOptionFunc) applyLines(c *linesConfig) { f(c) }

// LinesTopic sets the topic name of the lineage the source gives its elements,
// which is also the name a checkpoint store keeps the position under,
// overriding the default derived from the file name (see [Lines]). The name
// must follow Kafka's rule (1 to 249 of [a-zA-Z0-9._-], not "." or ".."); an
// illegal name makes Read and Resume fail with an error wrapping
// log.ErrInvalidTopic. An empty name keeps the default.
func LinesTopic(name string) LinesOption {
	return linesOptionFunc(func(c *linesConfig) { c.topic = name })
}

// MaxLines bounds the number of lines in one batch returned by Read,
// overriding the default of [DefaultMaxLines] (500). n <= 0 keeps the default.
func MaxLines(n int) LinesOption {
	return linesOptionFunc(func(c *linesConfig) {
		if n > 0 {
			c.maxLines = n
		}
	})
}

// Follow makes the source tail its file as tail -F does instead of ending at
// its end: Read waits for new lines and never returns io.EOF. A last line
// without '\n' is held back until its '\n' arrives, or until the file is
// rotated away. The source follows both kinds of rotation: when another file
// appears at the path (rename-and-create), it finishes the lines of the old
// file and goes on with the new one from its first line; when the file
// shrinks below what was read (copy-truncate), it starts the file again
// from its first line (as it does when the first bytes it read change). Its
// lines carry offsets that go on from the old file's, under a new
// generation. These rotations are followed whatever the [OnFileChange]
// policy, which applies when the source opens its file, and each is
// reported to [OnFileChanged]. A waiting Read wakes when inotify reports a
// change in the file's directory, and at least every [FollowInterval].
// Cancelling its context returns ctx.Err() at once. The file must exist
// when the source opens it.
func Follow() LinesOption {
	return linesOptionFunc(func(c *linesConfig) { c.follow = true })
}

// FollowInterval sets how often a source with [Follow] looks at its file
// while it waits, besides each time inotify reports a change in the file's
// directory, overriding [DefaultFollowInterval] (1 s). d <= 0 keeps the
// default.
func FollowInterval(d time.Duration) LinesOption {
	return linesOptionFunc(func(c *linesConfig) {
		if d > 0 {
			c.interval = d
		}
	})
}

// OnFileChange sets what the source does when it opens its file and finds
// that it is not the file its position counts lines of (replaced, rewritten
// in place, truncated; see [FileChange]): [FileChangeRestart] (the default)
// or [FileChangeFail].
func OnFileChange(p FileChangePolicy) LinesOption {
	return linesOptionFunc(func(c *linesConfig) { c.onChange = p })
}

// OnFileChanged sets a hook the source calls, on the goroutine of Read, with
// every file change it handles by starting a file from its first line: one
// found when it opens the file under [FileChangeRestart], and each rotation
// or truncation it follows with [Follow]. A nil fn sets no hook.
func OnFileChanged(fn func(*FileChangedError)) LinesOption {
	return linesOptionFunc(func(c *linesConfig) { c.onChanged = fn })
}

// LinesFromStore gives the source its checkpoint store from the start: the
// first Read resumes from store, as [LinesSource.Resume] would, unless Resume
// was called before. It is what lets a first run, which has no position to
// resume, keep the identity of its file (see [LinesSource]). A nil store is
// no store.
func LinesFromStore(store checkpoint.Store) LinesOption {
	return linesOptionFunc(func(c *linesConfig) { c.store = store })
}

// KeepCR makes the source keep the '\r' of a CRLF line ending in a line's
// text instead of stripping it (the default, see [LinesSource]), so that the
// text is the file's bytes up to the '\n'. It is the rule of strom produce
// --keep-cr: the same file read by either gives the same text.
func KeepCR() LinesOption {
	return linesOptionFunc(func(c *linesConfig) { c.keepCR = true })
}
