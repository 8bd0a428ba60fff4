// Package topicname holds Kafka's topic-naming rule, which the log and the
// checkpoint stores both apply (the checkpoint stores to state names too):
// a name is 1 to [MaxLen] bytes from [a-zA-Z0-9._-], and neither "." nor
// "..". No name that keeps the rule can leave the directory it names a file
// or folder in.
package topicname

import "fmt"

// MaxLen is Kafka's limit on the length of a topic name, in bytes.
const MaxLen = 249

// Validate reports whether name keeps the rule. It returns nil for a legal
// name, and otherwise an error that quotes the name and says what is wrong
// with it (empty, "." or "..", too long, or the first character outside
// [a-zA-Z0-9._-] and its byte offset). The error wraps no sentinel: callers
// wrap it in their own, e.g. fmt.Errorf("%w: %w", ErrInvalidTopic, err).
func Validate(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%q: empty name", name)
	case name == "." || name == "..":
		return fmt.Errorf("%q is not allowed", name)
	case len(name) > MaxLen:
		return fmt.Errorf("%q: name is %d bytes long, the limit is %d", name, len(name), MaxLen)
	}
	for i, c := range name {
		if !ValidChar(c) {
			return fmt.Errorf("%q has character %q at byte %d (allowed: a-z A-Z 0-9 . _ -)", name, c, i)
		}
	}
	return nil
}

// ValidChar reports whether c may stand in a topic name: a-z, A-Z, 0-9, '.',
// '_' or '-'.
func ValidChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
