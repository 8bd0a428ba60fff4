package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/strom-dev/strom/internal/service"
)

// resumedVerdict decides "check resumed": resumedFrom must be set, above the log start,
// at most before (the high watermark at the kill) and, when low >= 0, at least low (a
// position saved before the kill).
func resumedVerdict(resumedFrom *int64, before, low int64) (ok bool, why string) {
	switch {
	case resumedFrom == nil:
		return false, "FAIL: resumedFrom is null: the consumer found no checkpoint and started over"
	case *resumedFrom <= 0:
		return false, fmt.Sprintf("FAIL: resumed from %d, the log start: the consumer started over", *resumedFrom)
	case *resumedFrom > before:
		return false, fmt.Sprintf("FAIL: resumed from %d, past %d, the high watermark at the kill: it would skip records", *resumedFrom, before)
	case low >= 0 && *resumedFrom < low:
		return false, fmt.Sprintf("FAIL: resumed from %d, below %d, a position saved before the kill: a checkpoint was lost", *resumedFrom, low)
	}
	msg := fmt.Sprintf("ok: resumed from %d: not the log start, at most %d (the high watermark at the kill)", *resumedFrom, before)
	if low >= 0 {
		msg += fmt.Sprintf(", at least %d (saved before the kill)", low)
	}
	return true, msg
}

// runResumed is "check resumed".
func runResumed(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("resumed", flag.ContinueOnError)
	consumer := fs.String("consumer", "", "URL of the restarted consumer")
	atLeast := fs.Int64("at-least", -1, "position the consumer reported just before the kill; -1 = not checked")
	wait := fs.Duration("wait", 10*time.Second, "how long to wait for the consumer to answer")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return usagef("resumed: want one argument BEFORE, got %d", len(pos))
	case *consumer == "":
		return usagef("resumed: --consumer is required")
	}
	before, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || before < 0 {
		return usagef("resumed: BEFORE %q: want a non-negative offset", pos[0])
	}

	var st service.ConsumerStats
	deadline := time.Now().Add(*wait)
	for {
		err = service.GetJSON(context.Background(), statsURL(*consumer), &st)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(pollInterval)
	}
	if err != nil {
		return err
	}
	ok, why := resumedVerdict(st.ResumedFrom, before, *atLeast)
	fmt.Fprintf(out, "check resumed: %s (partition %d): %s\n", st.Name, st.Partition, why)
	if !ok {
		return errFailed
	}
	return nil
}

// runGet is "check get URL PATH".
func runGet(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("get: want URL PATH, got %d arguments", len(pos))
	}
	var raw json.RawMessage
	if err := service.GetJSON(context.Background(), statsURL(pos[0]), &raw); err != nil {
		return err
	}
	// Numbers stay json.Number, so an offset prints as the integer it is.
	var doc any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("get %s: %w", baseURL(pos[0]), err)
	}
	v, err := lookup(doc, pos[1])
	if err != nil {
		return fmt.Errorf("get %s from %s: %w", pos[1], baseURL(pos[0]), err)
	}
	if s, ok := v.(string); ok {
		_, err = fmt.Fprintln(out, s)
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, string(b))
	return err
}

// lookup follows a dot-separated path of object keys and array indexes through doc.
func lookup(doc any, path string) (any, error) {
	v := doc
	for _, step := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[step]
			if !ok {
				return nil, fmt.Errorf("no field %q", step)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("no index %q in an array of %d", step, len(x))
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("%q: not an object or array", step)
		}
	}
	return v, nil
}
