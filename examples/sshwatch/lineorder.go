package main

import (
	"context"
	"errors"
	"io"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// lineOrder reads the n partitions of the topic publish wrote, each a
// source.Partition replayed from its checkpoint, and returns their records
// in the order of the input file: line i is partition i % n at offset i / n,
// so the next line is the head with the least (offset, partition).
//
// Why not source.Topic: a Window's watermark is the least, over the source
// partitions it has seen, of each one's greatest event time. A TopicSource
// hands out a batch of one partition at a time (256 KiB by default, the
// whole sample), so the Window would see minutes of one partition before it
// knew the others exist, its watermark would pass their windows, and their
// lines would be late. In file order every partition is as far as the file
// is, and the windows equal those of a one-partition run.
//
// Each element keeps its partition's lineage, so positions are saved per
// partition as usual. A batch mixes partitions (the stream.Source contract
// allows it: offsets still increase within each partition). Read returns at
// most max elements (at least 1), and io.EOF once every partition has
// reached the high watermark it had when it opened.
type lineOrder struct {
	srcs []*source.PartitionSource
	bufs [][]stream.Element[log.Record] // copies of what each source returned, not yet handed out
	done []bool                         // the source returned io.EOF
	out  []stream.Element[log.Record]
	max  int
}

var _ stream.Source[log.Record] = (*lineOrder)(nil)

func newLineOrder(srcs []*source.PartitionSource, batch int) *lineOrder {
	return &lineOrder{
		srcs: srcs,
		bufs: make([][]stream.Element[log.Record], len(srcs)),
		done: make([]bool, len(srcs)),
		max:  max(batch, 1),
	}
}

// Read returns the next lines in file order.
func (s *lineOrder) Read(ctx context.Context) ([]stream.Element[log.Record], error) {
	s.out = s.out[:0]
	for len(s.out) < s.max {
		best := -1
		for p := range s.srcs {
			if len(s.bufs[p]) == 0 && !s.done[p] {
				if err := s.fill(ctx, p); err != nil {
					return nil, err
				}
			}
			if len(s.bufs[p]) == 0 {
				continue // done
			}
			if best < 0 || s.bufs[p][0].Offset < s.bufs[best][0].Offset {
				best = p // ties go to the lower partition: the earlier line
			}
		}
		if best < 0 {
			break // every partition is done
		}
		s.out = append(s.out, s.bufs[best][0])
		s.bufs[best] = s.bufs[best][1:]
	}
	if len(s.out) == 0 {
		return nil, io.EOF
	}
	return s.out, nil
}

// fill reads partition p's next batch into its buffer (a copy: the source
// reuses its slice on the next Read), or marks it done at its end.
func (s *lineOrder) fill(ctx context.Context, p int) error {
	for len(s.bufs[p]) == 0 && !s.done[p] {
		batch, err := s.srcs[p].Read(ctx)
		s.bufs[p] = append(s.bufs[p][:0], batch...)
		switch {
		case errors.Is(err, io.EOF):
			s.done[p] = true
		case err != nil:
			s.bufs[p] = s.bufs[p][:0] // read again after a resume
			return err
		}
	}
	return nil
}

// Close closes every partition source.
func (s *lineOrder) Close() error {
	var errs []error
	for _, src := range s.srcs {
		errs = append(errs, src.Close())
	}
	return errors.Join(errs...)
}
