package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/strom-dev/strom/log"
)

// encodingBase64 is the value of keyEncoding, valueEncoding and a header's
// encodings when the bytes beside it are not valid UTF-8 and are given as
// standard base64 (RFC 4648, padded) instead. Absent (or "utf8") means the
// JSON string holds the bytes themselves.
const (
	encodingBase64 = "base64"
	encodingUTF8   = "utf8"
)

// jsonRecord is one record as `consume --format json` prints it and
// `produce --format json` reads it, one object per line:
//
//	{"topic":"events","partition":0,"offset":7,"timestamp":1764547200000,"key":"alice","value":"caf\u00e9"}
//	{"topic":"events","partition":0,"offset":8,"timestamp":1764547200000,"key":null,"value":"Y2Fm6Q==","valueEncoding":"base64"}
//
// Lossless for any bytes: a key, value or header that is valid UTF-8 is a
// JSON string of exactly those bytes (JSON escapes NUL and control bytes);
// anything else is base64 with its encoding field set to "base64". A nil
// key or value is null, an empty one "". Headers keep their order.
type jsonRecord struct {
	Topic         string       `json:"topic,omitempty"`
	Partition     *int32       `json:"partition,omitempty"`
	Offset        *int64       `json:"offset,omitempty"`
	Timestamp     int64        `json:"timestamp,omitempty"`
	Key           *string      `json:"key"`
	KeyEncoding   string       `json:"keyEncoding,omitempty"`
	Value         *string      `json:"value"`
	ValueEncoding string       `json:"valueEncoding,omitempty"`
	Headers       []jsonHeader `json:"headers,omitempty"`
}

// jsonHeader is one header of a jsonRecord.
type jsonHeader struct {
	Key           string  `json:"key"`
	KeyEncoding   string  `json:"keyEncoding,omitempty"`
	Value         *string `json:"value"`
	ValueEncoding string  `json:"valueEncoding,omitempty"`
}

// encodeBytes returns b as a JSON string value and its encoding: the bytes
// themselves when they are valid UTF-8 (encoding ""), base64 otherwise;
// nil for nil.
func encodeBytes(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s, encodingBase64
}

// decodeBytes reverses encodeBytes; field names the field in errors.
func decodeBytes(s *string, encoding, field string) ([]byte, error) {
	if s == nil {
		return nil, nil
	}
	switch encoding {
	case "", encodingUTF8:
		return []byte(*s), nil
	case encodingBase64:
		b, err := base64.StdEncoding.DecodeString(*s)
		if err != nil {
			return nil, fmt.Errorf("%s is not valid base64: %w", field, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%sEncoding %q is not one of %q, %q", field, encoding, encodingUTF8, encodingBase64)
}

// toJSONRecord converts a record read from the log.
func toJSONRecord(r *log.Record) jsonRecord {
	p, o := r.Partition, r.Offset
	j := jsonRecord{Topic: r.Topic, Partition: &p, Offset: &o, Timestamp: r.Timestamp}
	j.Key, j.KeyEncoding = encodeBytes(r.Key)
	j.Value, j.ValueEncoding = encodeBytes(r.Value)
	for _, h := range r.Headers {
		var jh jsonHeader
		if utf8.ValidString(h.Key) {
			jh.Key = h.Key
		} else {
			jh.Key, jh.KeyEncoding = base64.StdEncoding.EncodeToString([]byte(h.Key)), encodingBase64
		}
		jh.Value, jh.ValueEncoding = encodeBytes(h.Value)
		j.Headers = append(j.Headers, jh)
	}
	return j
}

// parseJSONRecord reads one line of `produce --format json`. Unknown fields
// are an error; topic, partition and offset are accepted (so consume's
// output can be produced again) and ignored: the record's partition comes
// from its key or --partition, its offset from the log.
func parseJSONRecord(line []byte) (log.Record, error) {
	if !utf8.Valid(line) {
		return log.Record{}, fmt.Errorf("not valid UTF-8: give bytes that are not UTF-8 as base64 with \"valueEncoding\":\"base64\"")
	}
	dec := json.NewDecoder(strings.NewReader(string(line)))
	dec.DisallowUnknownFields()
	var j jsonRecord
	if err := dec.Decode(&j); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return log.Record{}, fmt.Errorf("unknown field %s (a typo? the fields are key, value, keyEncoding, valueEncoding, headers, timestamp, topic, partition, offset; drop others first, e.g. jq -c 'del(.%s)')", f, strings.Trim(f, `"`))
		}
		return log.Record{}, fmt.Errorf("not a JSON record: %w", err)
	}
	if dec.More() {
		return log.Record{}, fmt.Errorf("more than one JSON value on the line")
	}
	var r log.Record
	var err error
	if r.Key, err = decodeBytes(j.Key, j.KeyEncoding, "key"); err != nil {
		return r, err
	}
	if r.Value, err = decodeBytes(j.Value, j.ValueEncoding, "value"); err != nil {
		return r, err
	}
	if j.Timestamp < 0 {
		return r, fmt.Errorf("timestamp %d is negative (milliseconds since the Unix epoch)", j.Timestamp)
	}
	r.Timestamp = j.Timestamp
	for i, jh := range j.Headers {
		var h log.Header
		switch jh.KeyEncoding {
		case "", encodingUTF8:
			h.Key = jh.Key
		case encodingBase64:
			k, err := base64.StdEncoding.DecodeString(jh.Key)
			if err != nil {
				return r, fmt.Errorf("headers[%d].key is not valid base64: %w", i, err)
			}
			h.Key = string(k)
		default:
			return r, fmt.Errorf("headers[%d].keyEncoding %q is not one of %q, %q", i, jh.KeyEncoding, encodingUTF8, encodingBase64)
		}
		if h.Value, err = decodeBytes(jh.Value, jh.ValueEncoding, fmt.Sprintf("headers[%d].value", i)); err != nil {
			return r, err
		}
		r.Headers = append(r.Headers, h)
	}
	return r, nil
}

// preview returns up to max bytes of b as printable ASCII: printable bytes as
// themselves, the rest as Go escapes (\n, \x00, \xe9), then "..." when cut.
func preview(b []byte, max int) string {
	var sb strings.Builder
	cut := len(b) > max
	if cut {
		b = b[:max]
	}
	for _, c := range b {
		switch {
		case c == '\\':
			sb.WriteString(`\\`)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\r':
			sb.WriteString(`\r`)
		case c == '\t':
			sb.WriteString(`\t`)
		case c >= 0x20 && c < 0x7f:
			sb.WriteByte(c)
		default:
			fmt.Fprintf(&sb, `\x%02x`, c)
		}
	}
	if cut {
		sb.WriteString("...")
	}
	return sb.String()
}
