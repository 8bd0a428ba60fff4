package checkpoint

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// List returns every position saved in the store's directory, sorted by
// topic and then partition (strom positions prints it). A file is a position
// file when its name is <topic>-<partition>.position with a valid topic and
// a partition >= 0; other files, temporary files of an interrupted Save,
// state files (<name>.state) and their temporary files among them, are
// skipped. A position file that does not parse is an error
// wrapping [ErrCorrupt] and naming the file, as from Load; ctx is checked
// between files.
func (s *FileStore) List(ctx context.Context) ([]TopicPosition, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list %s: %w", s.dir, err)
	}
	var out []TopicPosition
	for _, e := range entries {
		topic, partition, ok := parseFileName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		pos, found, err := s.Load(ctx, topic, partition)
		if err != nil {
			return nil, err
		}
		if found { // else removed since ReadDir
			out = append(out, TopicPosition{Topic: topic, Partition: partition, Position: pos})
		}
	}
	slices.SortFunc(out, func(a, b TopicPosition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}

// parseFileName reverses fileName: "events-0.position" is ("events", 0).
// The partition follows the last '-', since a topic may hold '-' and a
// partition never does.
func parseFileName(name string) (topic string, partition int32, ok bool) {
	base, found := strings.CutSuffix(name, ".position")
	i := strings.LastIndexByte(base, '-')
	if !found || i < 0 {
		return "", 0, false
	}
	topic, num := base[:i], base[i+1:]
	p, err := strconv.ParseInt(num, 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != num || validateTopic(topic) != nil {
		return "", 0, false
	}
	return topic, int32(p), true
}
