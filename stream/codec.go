package stream

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"math"
	"reflect"
)

// codec encodes the keys and accumulators of a stateful stage one value at
// a time, for the changes a checkpoint.ChangelogStore keeps: each change
// is a record of its own, decoded alone. encoding/gob writes its type
// definitions into every stream, about 30 to 100 bytes for one small value,
// which would be most of a changed key's cost; so the kinds keys and
// counters mostly are (strings, byte slices, integers, floats, bools)
// have a fixed binary form of their own, and every other type goes
// through gob, as the snapshots of a checkpoint.StateStore do.
type codec[T any] struct {
	kind reflect.Kind // the fast path's kind; reflect.Invalid: gob
}

func newCodec[T any]() codec[T] {
	t := reflect.TypeFor[T]()
	switch t.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		// A named type with a method set of its own (a GobEncoder) is
		// still encoded by its kind: the value is what it is.
		return codec[T]{kind: t.Kind()}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return codec[T]{kind: reflect.Slice}
		}
	}
	return codec[T]{}
}

// append appends v's encoding to dst.
func (c codec[T]) append(dst []byte, v T) ([]byte, error) {
	// The common types without reflection: a restore of a million keys
	// spent a third of its time in reflect.ValueOf's allocations.
	switch p := any(&v).(type) {
	case *string:
		return append(dst, *p...), nil
	case *[]byte:
		return append(dst, *p...), nil
	case *int64:
		return binary.AppendVarint(dst, *p), nil
	case *int:
		return binary.AppendVarint(dst, int64(*p)), nil
	}
	rv := reflect.ValueOf(&v).Elem()
	switch c.kind {
	case reflect.String:
		return append(dst, rv.String()...), nil
	case reflect.Slice:
		return append(dst, rv.Bytes()...), nil
	case reflect.Bool:
		if rv.Bool() {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return binary.AppendVarint(dst, rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return binary.AppendUvarint(dst, rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(rv.Float())), nil
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&v); err != nil {
		return dst, err
	}
	return append(dst, buf.Bytes()...), nil
}

// decode decodes what append wrote, all of b.
func (c codec[T]) decode(b []byte) (T, error) {
	var v T
	switch p := any(&v).(type) {
	case *string:
		*p = string(b)
		return v, nil
	case *[]byte:
		*p = append([]byte{}, b...)
		return v, nil
	case *int64:
		x, n := binary.Varint(b)
		if n <= 0 || n != len(b) {
			return v, fmt.Errorf("not an int64: % x", b)
		}
		*p = x
		return v, nil
	case *int:
		x, n := binary.Varint(b)
		if n <= 0 || n != len(b) || int64(int(x)) != x {
			return v, fmt.Errorf("not an int: % x", b)
		}
		*p = int(x)
		return v, nil
	}
	rv := reflect.ValueOf(&v).Elem()
	switch c.kind {
	case reflect.String:
		rv.SetString(string(b))
		return v, nil
	case reflect.Slice:
		rv.SetBytes(append([]byte{}, b...))
		return v, nil
	case reflect.Bool:
		if len(b) != 1 || b[0] > 1 {
			return v, fmt.Errorf("bool of %d bytes", len(b))
		}
		rv.SetBool(b[0] == 1)
		return v, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, n := binary.Varint(b)
		if n <= 0 || n != len(b) || rv.OverflowInt(x) {
			return v, fmt.Errorf("not a %s: % x", rv.Type(), b)
		}
		rv.SetInt(x)
		return v, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x, n := binary.Uvarint(b)
		if n <= 0 || n != len(b) || rv.OverflowUint(x) {
			return v, fmt.Errorf("not a %s: % x", rv.Type(), b)
		}
		rv.SetUint(x)
		return v, nil
	case reflect.Float32, reflect.Float64:
		if len(b) != 8 {
			return v, fmt.Errorf("not a %s: %d bytes", rv.Type(), len(b))
		}
		rv.SetFloat(math.Float64frombits(binary.BigEndian.Uint64(b)))
		return v, nil
	}
	err := gob.NewDecoder(bytes.NewReader(b)).Decode(&v)
	return v, err
}
