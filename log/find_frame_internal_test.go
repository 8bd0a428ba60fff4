package log

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFindFrameAfterFindsAFrameBehindZerosOfAnyLength ensures the scan
// behind a stop skips runs of zeros by whole blocks without missing a frame
// that starts anywhere after them: at every 8-byte position around the
// block edges, after zeros shorter than, exactly as long as and longer
// than a block, the first intact frame is found at its byte position.
func TestFindFrameAfterFindsAFrameBehindZerosOfAnyLength(t *testing.T) {
	frame := appendFrame(nil, &Record{Value: []byte("behind the zeros"), Timestamp: 1}, 7, 0)
	dir := t.TempDir()
	for _, zeros := range []int{8, 4096 - 16, 4096 - 8, 4096, 4096 + 8, 2*4096 - 8, 3*4096 + 24, 1<<20 - 8, 1 << 20, 1<<20 + 4096 + 8} {
		for _, lead := range []int{0, 8, 4096 - 8} { // where the stop lies before the zeros
			b := make([]byte, lead+zeros)
			for i := range lead {
				b[i] = 0xa5 // garbage, never a frame
			}
			b = append(b, frame...)
			b = append(b, make([]byte, 64)...)
			path := filepath.Join(dir, segmentName(0))
			require.NoError(t, os.WriteFile(path, b, 0o644))
			s, err := openSegment(dir, 0, os.O_RDONLY)
			require.NoError(t, err)
			at, off, found, err := s.findFrameAfter(0, 7)
			s.f.Close()
			require.NoError(t, err)
			require.True(t, found, "%d zeros after %d bytes", zeros, lead)
			assert.EqualValues(t, lead+zeros, at, "%d zeros after %d bytes", zeros, lead)
			assert.EqualValues(t, 7, off)
		}
	}
}
