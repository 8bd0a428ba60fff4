package streamtest

// defaultBatchSize is the number of values per Read of a Slice source unless
// BatchSize says otherwise.
const defaultBatchSize = 100

// Option configures [Slice] and [Collect]. Each option says which of them it
// applies to; the other ignores it.
type Option func(*config)

type config struct {
	batchSize int
	failAt    map[int]error // call number (from 1) -> error
	follow    bool
	topic     string
}

func newConfig(opts []Option) config {
	c := config{batchSize: defaultBatchSize, topic: Topic}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// BatchSize sets how many values a [Slice] source returns per Read (the last
// batch may be shorter). Zero or less keeps the default, 100. Ignored by
// [Collect].
func BatchSize(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.batchSize = n
		}
	}
}

// FailAt makes call number n (counting from 1 over the fake's life, across
// Close and Resume) fail with err: the n-th Read of a [Slice] source returns
// (nil, err) without advancing, and the n-th Write of a [Collect] sink
// returns err without collecting. It may be given several times for
// different calls.
func FailAt(n int, err error) Option {
	return func(c *config) {
		if c.failAt == nil {
			c.failAt = make(map[int]error)
		}
		c.failAt[n] = err
	}
}

// Follow makes a [Slice] source behave as a source that follows a log at
// its high watermark: after the last value, Read waits until its context is
// done and returns ctx.Err() instead of io.EOF, so the pipeline ends only
// when it is cancelled. Use it to test what happens while a source is idle,
// such as Batch's linger. Ignored by [Collect].
func Follow() Option {
	return func(c *config) { c.follow = true }
}

// OnTopic makes a [Slice] source's elements carry topic instead of [Topic]
// (partition [Partition] still), and its Resume load that topic's
// position: two Slice sources of one pipeline (a [stream.Merge], a join's
// inputs) must have topics of their own, since positions are tracked per
// topic-partition. An empty topic keeps the default. Ignored by [Collect].
func OnTopic(topic string) Option {
	return func(c *config) {
		if topic != "" {
			c.topic = topic
		}
	}
}
