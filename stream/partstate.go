package stream

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"math"
	"slices"

	"github.com/strom-dev/strom/checkpoint"
)

// State per partition.
//
// A pipeline whose source is Assignable (a consumer-group member: its
// partitions come and go) keeps the state of each stateful stage per source
// partition, in a table of its own: the keys a partition's records touched,
// and the partition's marks (what of it reached the stage, its greatest
// event time, a Window's watermark). A table is saved, restored, handed
// over and dropped whole, one partition at a time, so a partition's state
// follows the partition to the process the group gives it to.
//
// It is saved to a checkpoint.ChangelogStore as changes: at each checkpoint,
// for every table that changed, the keys that changed (a key's encoding
// after a 0x01 byte, its new value or nil when it was dropped) and then the
// table's meta change (the key 0x00: the marks, in a gob of partMeta). The
// meta change comes last, and closes the save: a restore applies the
// changes read before a meta change, and drops those after the last one (a
// save cut short by a crash, whose effect the restored marks do not
// reflect); the keys they touched are written again at the next save, so
// that they do not stay the last change of their key.
//
// On any other source (the embedded log, files, slices) one process reads
// every partition and the state of a stage is one table, saved whole to a
// checkpoint.StateStore: a key whose records arrive on several partitions
// then has one state, as on one machine. On an Assignable source a key must
// follow the source's partitioning, so that all of its records are in one
// partition's table.

const (
	metaKey byte = 0x00 // the key of a table's meta change
	dataKey byte = 0x01 // the first byte of a state key's change
)

// partMeta is a table's meta change.
type partMeta struct {
	Header    stateHeader
	Part      partFile
	Watermark int64  // Window's
	Extra     []byte // a stage's own (Window: its pending results, a gob)
}

// metaChange returns the meta change of partition pk's table.
func (c *stateCore) metaChange(pk partKey, h stateHeader, wm int64, extra []byte) (checkpoint.Change, error) {
	m := partMeta{Header: h, Watermark: wm, Extra: extra, Part: partFile{Topic: pk.topic, Partition: pk.partition, MaxTs: math.MinInt64}}
	if ps := c.parts[pk]; ps != nil {
		m.Part.Next, m.Part.MaxTs = max(ps.next, ps.restored), ps.maxTs
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&m); err != nil {
		return checkpoint.Change{}, err
	}
	return checkpoint.Change{Stage: c.name, Topic: pk.topic, Partition: pk.partition, Key: []byte{metaKey}, Value: buf.Bytes()}, nil
}

// dataChange returns the change of a state key.
func (c *stateCore) dataChange(pk partKey, key, value []byte) checkpoint.Change {
	return checkpoint.Change{Stage: c.name, Topic: pk.topic, Partition: pk.partition, Key: key, Value: value}
}

// dirtyKeys is what a table of one partition changed since its last save:
// its keys, and whether anything (its marks too) did. dirty is nil for the
// one table of a pipeline that is not per partition: nothing is tracked.
type dirtyKeys[K comparable] struct {
	dirty   map[K]struct{}
	changed bool
}

// touch notes that k changed.
func (d *dirtyKeys[K]) touch(k K) {
	if d.dirty != nil {
		d.dirty[k] = struct{}{}
		d.changed = true
	}
}

// tableChanges appends to dst the changes of partition pk's table, d's
// keys (value gives a key's new encoding, nil when it is gone) and then its
// marks (meta), and clears d.
func tableChanges[K comparable](dst []checkpoint.Change, c *stateCore, pk partKey, d *dirtyKeys[K], kc codec[K],
	value func(K) ([]byte, error), meta func() (checkpoint.Change, error)) ([]checkpoint.Change, error) {
	for k := range d.dirty {
		key, err := stateKey(kc, k)
		if err != nil {
			return dst, err
		}
		val, err := value(k)
		if err != nil {
			return dst, err
		}
		dst = append(dst, c.dataChange(pk, key, val))
	}
	m, err := meta()
	if err != nil {
		return dst, err
	}
	clear(d.dirty)
	d.changed = false
	return append(dst, m), nil
}

// partRestorer rebuilds a stage's table of one partition from the changes
// a ChangelogStore gives back, decoded as they are read (apply), outside the
// stage's lock while the other partitions' records flow, and then puts it
// in place under the lock (installLocked), returning the offset the state
// reflects (-1: nothing saved). apply must not keep key or value.
type partRestorer interface {
	apply(key, value []byte) error
	installLocked() (next int64, err error)
}

// isMeta reports whether key is the key of a table's meta change.
func isMeta(key []byte) bool { return len(key) == 1 && key[0] == metaKey }

// tableRestore applies the changes of a table's keys to m as a restore
// reads them, a save at a time: the changes read since the last meta change
// wait in pending, decoded, until the next one closes them (a slice append
// each; recording what each key held before instead, to undo it, cost two
// more map operations a change, a third of a million-key restore). Those
// still pending at the end belong to a save a crash cut short: rollback
// drops them.
type tableRestore[K comparable, V any] struct {
	m       map[K]V
	pending []pendingChange[K, V]
	meta    []byte // the last meta change's value, a copy
}

type pendingChange[K comparable, V any] struct {
	k   K
	v   V
	del bool
}

func newTableRestore[K comparable, V any](m map[K]V) tableRestore[K, V] {
	return tableRestore[K, V]{m: m}
}

// set makes v the value of k.
func (r *tableRestore[K, V]) set(k K, v V) {
	r.pending = append(r.pending, pendingChange[K, V]{k: k, v: v})
}

// remove deletes k.
func (r *tableRestore[K, V]) remove(k K) {
	r.pending = append(r.pending, pendingChange[K, V]{k: k, del: true})
}

// closed records a meta change: the changes read since the last one are a
// whole save, and are applied.
func (r *tableRestore[K, V]) closed(meta []byte) {
	for _, c := range r.pending {
		if c.del {
			delete(r.m, c.k)
		} else {
			r.m[c.k] = c.v
		}
	}
	clear(r.pending)
	r.pending = r.pending[:0]
	r.meta = append(r.meta[:0], meta...)
}

// rollback drops the changes read since the last meta change and returns
// their keys.
func (r *tableRestore[K, V]) rollback() []K {
	torn := make([]K, 0, len(r.pending))
	for _, c := range r.pending {
		torn = append(torn, c.k)
	}
	clear(r.pending)
	r.pending = nil
	return torn
}

// restoreMeta decodes a table's meta change, checks it was written by a
// stage like this one (want), and restores the partition's marks.
func (c *stateCore) restoreMeta(pk partKey, data []byte, want stateHeader) (partMeta, error) {
	var m partMeta
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&m); err != nil {
		return m, fmt.Errorf("stream: state of stage %q for %s/%d: %w: cannot decode its marks: %w", c.name, pk.topic, pk.partition, checkpoint.ErrCorrupt, err)
	}
	h := m.Header
	if h.Version != stateVersion || h.Kind != want.Kind || h.Spec != want.Spec || h.Types != want.Types {
		return m, fmt.Errorf("stream: state of stage %q for %s/%d: %w: saved by %s %s (%s, version %d), the stage is %s %s (%s)",
			c.name, pk.topic, pk.partition, ErrStateMismatch, h.Kind, h.Spec, h.Types, h.Version, want.Kind, want.Spec, want.Types)
	}
	c.dropPart(pk)
	ps := &partState{restored: m.Part.Next, next: m.Part.Next, maxTs: m.Part.MaxTs, pk: pk}
	c.parts[pk] = ps
	c.list = append(c.list, ps)
	c.lastPart = nil
	return m, nil
}

// dropPart forgets partition pk's marks.
func (c *stateCore) dropPart(pk partKey) {
	ps := c.parts[pk]
	if ps == nil {
		return
	}
	delete(c.parts, pk)
	if i := slices.Index(c.list, ps); i >= 0 {
		c.list = slices.Delete(c.list, i, i+1)
	}
	c.lastPart = nil
}

// assignPart marks partition pk as assigned: it holds a Window's watermark
// until it delivers (see PartitionLister).
func (c *stateCore) assignPart(pk partKey, now int64) {
	ps := c.part(pk.topic, pk.partition)
	ps.listed, ps.active = true, now
}

// stateKey returns the key of a state key's change: dataKey, then its
// encoding.
func stateKey[K any](kc codec[K], k K) ([]byte, error) {
	return kc.append([]byte{dataKey}, k)
}

// decodeKey decodes the key of a data change.
func decodeKey[K any](kc codec[K], b []byte) (K, error) {
	if len(b) == 0 || b[0] != dataKey {
		var zero K
		return zero, fmt.Errorf("a key that is neither a state key nor the marks: % x", b[:min(len(b), 16)])
	}
	return kc.decode(b[1:])
}
