package torture

// Scenario eos-kafka's faults: what each kind does, how a seed draws them, and
// the broker faults' control functions on the in-process Kafka. See the
// package doc, "Scenario eos-kafka".

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The kinds of fault scenario eos-kafka injects, each drawn with the same
// weight (EOSKafkaFaultKinds lists them in order).
const (
	// FaultKill SIGKILLs a running worker 0 to eosKillDelay after a
	// chunk of records was produced, and starts it again at once in the
	// same slot (same transactional id: the new incarnation fences the
	// killed one's open transaction).
	FaultKill = "kill"
	// FaultKillInCommit holds a worker's EndTxn commit at the broker,
	// SIGKILLs the worker, and then, by the seed, lets the commit through
	// either before the new incarnation starts (the dead worker's
	// transaction commits) or after the new incarnation's
	// InitProducerID fenced it (the commit arrives from a zombie and is
	// refused).
	FaultKillInCommit = "kill-in-commit"
	// FaultRebalance starts the second worker slot when it is stopped
	// (a member joins) and stops it with SIGTERM when it runs (a member
	// leaves; it must exit 0).
	FaultRebalance = "rebalance"
	// FaultProduce answers a worker's next Produce with a retriable error
	// on every partition, drops its connection, or delays it.
	FaultProduce = "produce"
	// FaultEndTxn answers a worker's next EndTxn commit with an error
	// (retriable, or one franz-go turns into an abort), drops its
	// connection, or delays it.
	FaultEndTxn = "endtxn"
	// FaultTxnOffsetCommit answers a worker's next TxnOffsetCommit with
	// an error that makes the transaction abort (a stale generation, an
	// unknown member, a rebalance in progress, ...), drops its
	// connection, or delays it.
	FaultTxnOffsetCommit = "txnoffsetcommit"
	// FaultHeartbeat answers a worker's next Heartbeat with an error that
	// makes it rejoin the group (or lose its partitions first), drops its
	// connection, or delays it.
	FaultHeartbeat = "heartbeat"
)

// EOSKafkaFaultKinds are the kinds of fault scenario eos-kafka draws from.
var EOSKafkaFaultKinds = []string{FaultKill, FaultKillInCommit, FaultRebalance, FaultProduce, FaultEndTxn, FaultTxnOffsetCommit, FaultHeartbeat}

// eosKillDelay bounds the seeded wait between producing a chunk and a
// kill: a worker reads a chunk within milliseconds and ends a transaction
// every 100 ms, so a kill within 150 ms lands while the chunk is read,
// counted, written or committed.
const eosKillDelay = 150 * time.Millisecond

// The broker faults' delays: long enough that transactions and
// heartbeats pile up behind them, below the session timeout, so a delay
// alone expels no member.
const (
	eosMinDelay = 100 * time.Millisecond
	eosMaxDelay = 600 * time.Millisecond
)

// errFaultDrop is what a control function returns to make kfake close the
// connection the request came on (the request is not handled).
var errFaultDrop = errors.New("torture: eos-kafka fault: connection dropped")

// The answers a broker fault can give, by request key: error codes the
// client retries or turns into an abort. A fault also drops the
// connection or delays the request (eosModes).
var eosFaultCodes = map[int16][]*kerr.Error{
	int16(kmsg.Produce): {kerr.NotLeaderForPartition, kerr.NotEnoughReplicas, kerr.RequestTimedOut},
	int16(kmsg.EndTxn): {kerr.ConcurrentTransactions, kerr.NotCoordinator, kerr.CoordinatorNotAvailable,
		kerr.TransactionAbortable, kerr.UnknownServerError},
	int16(kmsg.TxnOffsetCommit): {kerr.IllegalGeneration, kerr.UnknownMemberID, kerr.RebalanceInProgress,
		kerr.ConcurrentTransactions, kerr.CoordinatorLoadInProgress, kerr.NotCoordinator, kerr.UnknownServerError},
	int16(kmsg.Heartbeat): {kerr.RebalanceInProgress, kerr.UnknownMemberID, kerr.IllegalGeneration},
}

// The request key of each broker fault.
var eosFaultKeys = map[string]int16{
	FaultProduce:         int16(kmsg.Produce),
	FaultEndTxn:          int16(kmsg.EndTxn),
	FaultTxnOffsetCommit: int16(kmsg.TxnOffsetCommit),
	FaultHeartbeat:       int16(kmsg.Heartbeat),
}

// eosFault is one fault of a seed's plan: its kind and the choices the
// seed made for it.
type eosFault struct {
	kind  string
	code  *kerr.Error   // a broker fault's answer; nil with drop or delay
	drop  bool          // a broker fault: close the connection
	delay time.Duration // a broker fault: hold the request this long; a kill: wait this long first
	// fenceFirst: FaultKillInCommit lets the held commit through only
	// after the new incarnation's InitProducerID.
	fenceFirst bool
}

// String names the fault as the summary counts it: the kind, and for a
// broker fault what it answered ("endtxn/CONCURRENT_TRANSACTIONS",
// "heartbeat/drop", "produce/delay").
func (f eosFault) String() string {
	switch {
	case f.code != nil:
		return f.kind + "/" + f.code.Message
	case f.drop:
		return f.kind + "/drop"
	case eosFaultKeys[f.kind] != 0 || f.kind == FaultProduce:
		return f.kind + "/delay"
	case f.kind == FaultKillInCommit && f.fenceFirst:
		return f.kind + "/fenced"
	case f.kind == FaultKillInCommit:
		return f.kind + "/committed"
	}
	return f.kind
}

// planEOSFaults draws n faults of the given kinds (all when kinds is
// empty) and their choices from rng.
func planEOSFaults(rng *rand.Rand, n int, kinds []string) []eosFault {
	if len(kinds) == 0 {
		kinds = EOSKafkaFaultKinds
	}
	faults := make([]eosFault, n)
	for i := range faults {
		f := eosFault{kind: kinds[rng.IntN(len(kinds))]}
		switch f.kind {
		case FaultKill:
			f.delay = time.Duration(rng.Int64N(int64(eosKillDelay) + 1))
		case FaultKillInCommit:
			f.fenceFirst = rng.IntN(2) == 0
		case FaultRebalance:
		default:
			codes := eosFaultCodes[eosFaultKeys[f.kind]]
			switch m := rng.IntN(len(codes) + 2); {
			case m < len(codes):
				f.code = codes[m]
			case m == len(codes):
				f.drop = true
			default:
				f.delay = eosMinDelay + time.Duration(rng.Int64N(int64(eosMaxDelay-eosMinDelay)+1))
			}
		}
		faults[i] = f
	}
	return faults
}

// brokerFault is a broker fault armed on the in-process Kafka: its control
// function answers the first request it matches, then lets every later
// one through (and is dropped).
type brokerFault struct {
	fault eosFault
	fired chan struct{} // closed once the fault answered a request
	done  atomic.Bool   // set when it fired or was disarmed
	// held (FaultKillInCommit) receives the transactional id of the
	// commit held, and release lets it through.
	held    chan string
	release chan struct{}
}

// arm installs f's control function on kc: FaultProduce matches a
// transactional Produce (a worker's, never the supervisor's), the others
// any request of their key (only workers send them). FaultKillInCommit
// matches an EndTxn commit and holds it until release is closed.
func armBrokerFault(kc *kfake.Cluster, f eosFault) *brokerFault {
	bf := &brokerFault{fault: f, fired: make(chan struct{})}
	key := eosFaultKeys[f.kind]
	if f.kind == FaultKillInCommit {
		key = int16(kmsg.EndTxn)
		bf.held, bf.release = make(chan string, 1), make(chan struct{})
	}
	kc.ControlKey(key, func(req kmsg.Request) (kmsg.Response, error, bool) {
		if bf.done.Load() {
			kc.DropControl()
			return nil, nil, false
		}
		if !bf.matches(req) {
			return nil, nil, false
		}
		bf.done.Store(true)
		kc.DropControl()
		close(bf.fired)
		switch {
		case bf.held != nil:
			bf.held <- req.(*kmsg.EndTxnRequest).TransactionalID
			kc.SleepControl(func() { <-bf.release })
			return nil, nil, false
		case f.drop:
			return nil, errFaultDrop, true
		case f.code != nil:
			return errorResponse(req, f.code.Code), nil, true
		default:
			kc.SleepControl(func() { time.Sleep(f.delay) })
			return nil, nil, false
		}
	})
	return bf
}

// matches reports whether req is one the fault answers.
func (bf *brokerFault) matches(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		return r.TransactionID != nil
	case *kmsg.EndTxnRequest:
		return r.Commit
	case *kmsg.TxnOffsetCommitRequest:
		return len(r.Topics) > 0
	case *kmsg.HeartbeatRequest:
		return r.Group == EOSKafkaGroup
	}
	return false
}

// disarm makes the control function let every request through; a held
// commit is released.
func (bf *brokerFault) disarm() {
	bf.done.Store(true)
	if bf.release != nil {
		select {
		case <-bf.release:
		default:
			close(bf.release)
		}
	}
}

// errorResponse answers req with code: on every partition of a Produce or
// a TxnOffsetCommit, at the top of an EndTxn or a Heartbeat.
func errorResponse(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.TxnOffsetCommitRequest:
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.EndTxnRequest:
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.HeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code
		return resp
	}
	panic(fmt.Sprintf("torture: no error response for a %T", req))
}

// brokerWatch observes, without changing anything, the requests that tell
// what the transactions did: EndTxn commits and aborts, and each
// transactional id's InitProducerIDs (a new incarnation fencing the last).
type brokerWatch struct {
	mu       sync.Mutex
	commits  int
	aborts   int
	inits    map[string]int
	initWake chan struct{} // closed and replaced at every InitProducerID
	log      *bufio.Writer // nil: no log
	logFile  *os.File
	start    time.Time
}

// watchBroker installs the observing control functions on kc; logPath,
// when not "", is the file the requests that commit offsets or end
// transactions are logged to, one a line (close ends it), for a seed that
// fails.
func watchBroker(kc *kfake.Cluster, logPath string) (*brokerWatch, error) {
	w := &brokerWatch{inits: make(map[string]int), initWake: make(chan struct{}), start: time.Now()}
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			return nil, fmt.Errorf("torture: eos-kafka: %w", err)
		}
		w.logFile, w.log = f, bufio.NewWriter(f)
	}
	kc.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.EndTxnRequest)
		w.mu.Lock()
		if r.Commit {
			w.commits++
		} else {
			w.aborts++
		}
		w.logf("EndTxn %s producer %d epoch %d commit %v", r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit)
		w.mu.Unlock()
		return nil, nil, false
	})
	kc.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.InitProducerIDRequest)
		if id := r.TransactionalID; id != nil {
			w.mu.Lock()
			w.inits[*id]++
			close(w.initWake)
			w.initWake = make(chan struct{})
			w.logf("InitProducerID %s producer %d epoch %d", *id, r.ProducerID, r.ProducerEpoch)
			w.mu.Unlock()
		}
		return nil, nil, false
	})
	kc.ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.TxnOffsetCommitRequest)
		var b strings.Builder
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				fmt.Fprintf(&b, " %s/%d:%d(e%d)", t.Topic, p.Partition, p.Offset, p.LeaderEpoch)
			}
		}
		w.mu.Lock()
		w.logf("TxnOffsetCommit %s producer %d epoch %d member %s generation %d:%s", r.TransactionalID, r.ProducerID, r.ProducerEpoch,
			r.MemberID, r.Generation, b.String())
		w.mu.Unlock()
		return nil, nil, false
	})
	kc.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		var b strings.Builder
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				fmt.Fprintf(&b, " %s/%d:%d(e%d)", t.Topic, p.Partition, p.Offset, p.LeaderEpoch)
			}
		}
		w.mu.Lock()
		w.logf("OffsetCommit group %s member %s generation %d:%s", r.Group, r.MemberID, r.Generation, b.String())
		w.mu.Unlock()
		return nil, nil, false
	})
	return w, nil
}

// logf writes a line to the log; w.mu is held.
func (w *brokerWatch) logf(format string, args ...any) {
	if w.log == nil {
		return
	}
	fmt.Fprintf(w.log, "%7.3fs  ", time.Since(w.start).Seconds())
	fmt.Fprintf(w.log, format, args...)
	w.log.WriteByte('\n')
}

// note writes what the supervisor did to the log.
func (w *brokerWatch) note(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logf("--- %s", what)
}

// close flushes and closes the log.
func (w *brokerWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.log != nil {
		_ = w.log.Flush()
		_ = w.logFile.Close()
		w.log = nil
	}
}

// initsOf returns how many InitProducerIDs id has sent, and a channel
// closed at the next one.
func (w *brokerWatch) initsOf(id string) (int, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inits[id], w.initWake
}

// counts returns the EndTxn commits and aborts seen.
func (w *brokerWatch) counts() (commits, aborts int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.commits, w.aborts
}

// faultKindsValid reports the first of kinds that is not a fault kind.
func faultKindsValid(kinds []string) error {
	for _, k := range kinds {
		if !slices.Contains(EOSKafkaFaultKinds, k) {
			return fmt.Errorf("torture: scenario eos-kafka: unknown fault kind %q (%v)", k, EOSKafkaFaultKinds)
		}
	}
	return nil
}
