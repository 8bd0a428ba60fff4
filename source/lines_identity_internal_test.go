package source

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/topicname"
)

// TestIdentityStateNameIsLegalForEveryTopic ensures the identity snapshot's
// name is a legal state name for topics of every length, and that two long
// topics differing only past the cut get different names.
func TestIdentityStateNameIsLegalForEveryTopic(t *testing.T) {
	require.Equal(t, "lines-identity.app.log", identityStateName("app.log"))
	a := identityStateName(strings.Repeat("t", 248) + "a")
	b := identityStateName(strings.Repeat("t", 248) + "b")
	for _, name := range []string{a, b, identityStateName("x"), identityStateName(strings.Repeat("t", 234))} {
		require.NoError(t, topicname.Validate(name), name)
	}
	require.Len(t, a, topicname.MaxLen)
	require.NotEqual(t, a, b)
}
