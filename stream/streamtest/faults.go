package streamtest

import (
	"context"
	"errors"
	"sync"

	"github.com/strom-dev/strom/stream"
)

// ErrInjected is the error a [Faults] rule returns when it was given a nil
// error.
var ErrInjected = errors.New("streamtest: injected fault")

// Faults injects failures and panics into a stage's function or sink at
// chosen records. Rules name a record by k, its index among the records the
// wrapped function has seen, counting from 0: with a sequential stage fed by
// a [Slice] source and no filter before it, k is the record's offset. Build
// one with [NewFaults], add rules ([Faults.FailAt], [Faults.FailTimes],
// [Faults.PanicAt]), and wrap the stage's function with [Faults.Map],
// [Faults.Filter], [Faults.Tap], [Wrap] or its sink with [Faults.Sink]:
//
//	faults := streamtest.NewFaults[string]().FailAt(2, errBad)
//	s.Map(faults.Map(upper), stream.Skip())
//
// Every wrapper made from one Faults shares its count; use one Faults per
// stage.
//
// # Retries
//
// A retry is another call of the function with the same record, and must
// not count as the next record. The wrapper cannot tell a retry from the
// next record by itself, so tell it how many calls the stage makes per
// record with [Faults.Attempts] (the attempts given to stream.Retry): a call
// that follows a failed call (an error or a panic, injected or the
// function's own) is then taken as a retry of the same record while that
// record has had fewer calls than Attempts, and as the next record
// otherwise. Without Attempts every call is a new record, right for a stage
// without Retry.
//
// # Parallel stages
//
// With stream.Parallel or stream.KeyOrdered the function runs on several
// goroutines, and k counts records in the order the calls start, which
// depends on scheduling: which record is the k-th is not fixed, only that
// exactly one record is. The retry accounting above assumes a record's
// retries come before the next record's first call, which holds for
// sequential stages only: do not combine Attempts with a parallel stage.
//
// The zero value is ready to use and injects nothing. A Faults is safe for
// concurrent use; rules may be added while a pipeline runs.
type Faults[T any] struct {
	mu       sync.Mutex
	rules    map[int]rule
	attempts int

	calls    int  // calls of the wrapped functions (Writes of a sink)
	records  int  // records seen: the next record's index
	base     int  // index of the current call's first record
	n        int  // records in the current call (values of a Write)
	attempt  int  // calls of the current record so far
	failed   bool // the last call failed
	injected int
}

// rule is what to do with one record: fail its first times calls (times <
// 0: every call) with err, or panic with value.
type rule struct {
	times  int
	err    error
	panics bool
	value  any
}

// NewFaults returns a Faults without rules.
func NewFaults[T any]() *Faults[T] { return &Faults[T]{} }

// FailAt makes every call of the wrapped function with record k return err
// (ErrInjected when err is nil), retries included: the record fails for
// good and the stage's failure policy applies. It replaces any rule for k
// and returns f.
func (f *Faults[T]) FailAt(k int, err error) *Faults[T] {
	return f.set(k, rule{times: -1, err: orInjected(err)})
}

// FailTimes makes the first n calls with record k return err (ErrInjected
// when err is nil) and lets later calls through to the function: with
// stream.Retry(n+1, ...) and Attempts(n+1) the record passes on its last
// attempt. n <= 0 removes the rule for k. It replaces any rule for k and
// returns f.
func (f *Faults[T]) FailTimes(k, n int, err error) *Faults[T] {
	if n <= 0 {
		f.mu.Lock()
		delete(f.rules, k)
		f.mu.Unlock()
		return f
	}
	return f.set(k, rule{times: n, err: orInjected(err)})
}

// PanicAt makes every call of the wrapped function with record k panic with
// v, retries included (a retry happens only under stream.Recover). It
// replaces any rule for k and returns f.
func (f *Faults[T]) PanicAt(k int, v any) *Faults[T] {
	return f.set(k, rule{times: -1, panics: true, value: v})
}

// Attempts tells f that the stage calls its function up to n times per
// record, as stream.Retry(n, ...) makes it: see the Faults doc on retries.
// n <= 1 means no retries (the default). It returns f.
func (f *Faults[T]) Attempts(n int) *Faults[T] {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts = n
	return f
}

func (f *Faults[T]) set(k int, r rule) *Faults[T] {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rules == nil {
		f.rules = make(map[int]rule)
	}
	f.rules[k] = r
	return f
}

func orInjected(err error) error {
	if err == nil {
		return ErrInjected
	}
	return err
}

// Calls returns how many times the wrapped functions were called (Write for
// a sink), retries and injected faults included.
func (f *Faults[T]) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Records returns how many distinct records the wrapped functions have
// seen, retries not counted: the index the next record will have.
func (f *Faults[T]) Records() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.records
}

// Injected returns how many calls a rule failed or panicked.
func (f *Faults[T]) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// begin accounts for a call with n records and returns the rule that
// applies to it, if any: that of the lowest record of the call with a rule
// for this attempt.
func (f *Faults[T]) begin(n int) (rule, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.failed && f.attempt < f.attempts {
		f.attempt++ // a retry of the same records
	} else {
		f.base, f.n, f.attempt = f.records, n, 1
		f.records += n
	}
	f.failed = false
	for k := f.base; k < f.base+f.n; k++ {
		r, ok := f.rules[k]
		if ok && (r.panics || r.times < 0 || f.attempt <= r.times) {
			f.failed = true
			f.injected++
			return r, true
		}
	}
	return rule{}, false
}

// end records whether the call that began last failed.
func (f *Faults[T]) end(failed bool) {
	f.mu.Lock()
	f.failed = failed
	f.mu.Unlock()
}

// call runs one call of a wrapped function over n records.
func call[T, U any](f *Faults[T], n int, do func() (U, error)) (out U, err error) {
	if r, hit := f.begin(n); hit {
		if r.panics {
			panic(r.value)
		}
		return out, r.err
	}
	failed := true // unless do returns: a panic of the function is a failure
	defer func() { f.end(failed) }()
	out, err = do()
	failed = err != nil
	return out, err
}

// Wrap returns fn with f's faults injected: a call with a record that has a
// rule fails or panics without calling fn, any other call is fn's. It fits
// every typed stage function: stream.MapTo (U the output), stream.FlatMap
// (U a slice), Filter (U bool). It panics if fn is nil.
func Wrap[T, U any](f *Faults[T], fn func(context.Context, T) (U, error)) func(context.Context, T) (U, error) {
	if fn == nil {
		panic("streamtest: Wrap called with a nil function")
	}
	return func(ctx context.Context, v T) (U, error) {
		return call(f, 1, func() (U, error) { return fn(ctx, v) })
	}
}

// Map returns fn, a stream.Map function, with f's faults injected (see
// [Wrap]). A nil fn is the identity, for a stage that only injects faults.
func (f *Faults[T]) Map(fn func(context.Context, T) (T, error)) func(context.Context, T) (T, error) {
	if fn == nil {
		fn = func(_ context.Context, v T) (T, error) { return v, nil }
	}
	return Wrap(f, fn)
}

// Filter returns fn, a stream.Filter function, with f's faults injected
// (see [Wrap]). A nil fn keeps every value.
func (f *Faults[T]) Filter(fn func(context.Context, T) (bool, error)) func(context.Context, T) (bool, error) {
	if fn == nil {
		fn = func(context.Context, T) (bool, error) { return true, nil }
	}
	return Wrap(f, fn)
}

// Tap returns fn, a stream.Tap function, with f's faults injected (see
// [Wrap]). A nil fn does nothing, for a stage that only injects faults.
func (f *Faults[T]) Tap(fn func(context.Context, T) error) func(context.Context, T) error {
	return func(ctx context.Context, v T) error {
		_, err := call(f, 1, func() (struct{}, error) {
			if fn == nil {
				return struct{}{}, nil
			}
			return struct{}{}, fn(ctx, v)
		})
		return err
	}
}

// Sink returns s with f's faults injected. Here too k counts records, the
// values written, from 0 in write order (a [Collector]'s FailAt counts
// Write calls from 1 instead): a Write whose values include a record with a
// rule fails (or panics) as a whole without calling s.Write, as a sink that
// failed the batch does. A retried Write (see Attempts) is the same records
// again. It panics if s is nil.
func (f *Faults[T]) Sink(s stream.Sink[T]) stream.Sink[T] {
	if s == nil {
		panic("streamtest: Faults.Sink called with a nil sink")
	}
	return faultSink[T]{f: f, s: s}
}

type faultSink[T any] struct {
	f *Faults[T]
	s stream.Sink[T]
}

func (w faultSink[T]) Write(ctx context.Context, values []T) error {
	_, err := call(w.f, len(values), func() (struct{}, error) { return struct{}{}, w.s.Write(ctx, values) })
	return err
}
