package topicname_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/topicname"
)

// TestValidateAcceptsKafkaLegalNames proves names of 1 to MaxLen bytes from
// [a-zA-Z0-9._-], dots included, pass.
func TestValidateAcceptsKafkaLegalNames(t *testing.T) {
	for _, name := range []string{"a", "Ok.name_with-dashes.1", "...", ".a", strings.Repeat("z", topicname.MaxLen)} {
		assert.NoError(t, topicname.Validate(name), name)
	}
}

// TestValidateSaysWhatIsWrong proves each way of breaking the rule is refused
// with a message that names the fault.
func TestValidateSaysWhatIsWrong(t *testing.T) {
	for name, want := range map[string]string{
		"":                                      "empty name",
		".":                                     `"." is not allowed`,
		"..":                                    `".." is not allowed`,
		"../x":                                  `character '/' at byte 2`,
		"a b":                                   `character ' ' at byte 1`,
		"caf\u00e9":                             `character 'é' at byte 3`,
		strings.Repeat("a", topicname.MaxLen+1): "250 bytes long, the limit is 249",
	} {
		err := topicname.Validate(name)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), want)
	}
}

// TestValidCharMatchesValidate proves ValidChar and Validate agree on every
// single-byte name.
func TestValidCharMatchesValidate(t *testing.T) {
	for c := rune(0); c < 0x80; c++ {
		if c == '.' {
			continue // "." alone is refused as a name, though legal in one
		}
		assert.Equal(t, topicname.ValidChar(c), topicname.Validate(string(c)) == nil, "%q", c)
	}
}
