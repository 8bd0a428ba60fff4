// Package topicid holds the identity of a topic, which the log stores in a
// topic's topic.json and the checkpoint stores save with every position (as
// log.TopicID and checkpoint.TopicID, aliases of [ID]): a position saved
// against one incarnation of a topic is told apart from a topic of the same
// name deleted and created again, whose offsets count other records.
//
// An ID is Kafka's topic ID (KIP-516): 16 random bytes, a version 4 UUID,
// written as 22 characters of unpadded URL-safe base64, as Kafka's tools
// print it ("ZtbcOJ8_SA-ji9PcQpfNBw"). The zero ID means "unknown": a
// topic created by a version of strom before IDs, or a position saved
// without one; nothing is compared against it.
package topicid

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// ID is a topic's identity: 16 bytes, the zero value meaning unknown.
type ID [16]byte

// encodedLen is the length of an ID's text: 16 bytes in unpadded base64.
const encodedLen = 22

// New returns a random ID: a version 4 (random) UUID, as Kafka makes
// them, never the zero ID. It reads crypto/rand, which does not fail on
// the systems Go supports (it panics rather than return weak bytes).
func New() ID {
	var id ID
	for id.IsZero() {
		_, _ = rand.Read(id[:])   // never returns an error (crypto/rand's doc)
		id[6] = id[6]&0x0f | 0x40 // version 4
		id[8] = id[8]&0x3f | 0x80 // variant RFC 4122
	}
	return id
}

// IsZero reports whether id is the zero ID: unknown.
func (id ID) IsZero() bool { return id == ID{} }

// String returns id as 22 characters of unpadded URL-safe base64, as
// Kafka prints topic IDs, or "" for the zero ID.
func (id ID) String() string {
	if id.IsZero() {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// MarshalText returns String's text (empty for the zero ID), so an ID is a
// JSON string.
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses text as Parse does.
func (id *ID) UnmarshalText(text []byte) error {
	v, err := Parse(string(text))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Parse parses the text of an ID: 22 characters of unpadded URL-safe
// base64 (what String writes) giving 16 bytes that are not all zero, or ""
// for the zero ID. Any other text is an error quoting it.
func Parse(s string) (ID, error) {
	var id ID
	if s == "" {
		return id, nil
	}
	if len(s) != encodedLen {
		return ID{}, fmt.Errorf("topic ID %q: %d characters, want %d of unpadded URL-safe base64", s, len(s), encodedLen)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != len(id) {
		return ID{}, fmt.Errorf("topic ID %q: not unpadded URL-safe base64 of 16 bytes", s)
	}
	copy(id[:], b)
	if id.IsZero() {
		return ID{}, fmt.Errorf("topic ID %q: all zero bytes (the zero ID is written as no ID)", s)
	}
	return id, nil
}
