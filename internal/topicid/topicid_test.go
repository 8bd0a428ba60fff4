package topicid

import (
	"encoding/json"
	"testing"
)

func TestNewIsRandomVersion4(t *testing.T) {
	a, b := New(), New()
	if a == b || a.IsZero() {
		t.Fatalf("New returned %v and %v", a, b)
	}
	if a[6]>>4 != 4 || a[8]>>6 != 2 {
		t.Fatalf("%x is not a version 4 UUID", a[:])
	}
}

func TestStringParsesBack(t *testing.T) {
	id := New()
	s := id.String()
	if len(s) != 22 {
		t.Fatalf("String = %q, want 22 characters", s)
	}
	got, err := Parse(s)
	if err != nil || got != id {
		t.Fatalf("Parse(%q) = %v, %v; want %v", s, got, err, id)
	}
	b, _ := json.Marshal(struct{ ID ID }{id})
	var back struct{ ID ID }
	if err := json.Unmarshal(b, &back); err != nil || back.ID != id {
		t.Fatalf("JSON %s loads back as %v, %v", b, back.ID, err)
	}
}

func TestParseRejectsWhatStringNeverWrites(t *testing.T) {
	for _, s := range []string{"x", "AAAAAAAAAAAAAAAAAAAAAA", "ZtbcOJ8_SA-ji9PcQpfNBw==", "ZtbcOJ8/SA+ji9PcQpfNBw", "ZtbcOJ8_SA-ji9PcQpfNBx"} {
		if id, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", s, id)
		}
	}
	if id, err := Parse(""); err != nil || !id.IsZero() {
		t.Errorf("Parse(\"\") = %v, %v; want the zero ID", id, err)
	}
}
