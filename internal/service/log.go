package service

import (
	"errors"
	"fmt"

	"github.com/strom-dev/strom/log"
)

// OpenReadOnly opens the log directory dir read-only, for a service that
// reads what another process writes (the consumer, the projection). It
// never creates dir: a missing one (or a path that is not a directory) is a
// startup error that matches log.ErrNoLog and says that creator, the
// service that writes the log, creates it, rather than an empty log whose
// topic stays unknown while the service retries it forever.
func OpenReadOnly(dir, creator string) (*log.Log, error) {
	lg, err := log.Open(dir, log.ReadOnly())
	if errors.Is(err, log.ErrNoLog) {
		return nil, fmt.Errorf("--dir: %w; a reader never creates the log: check the path, or start the %s first", err, creator)
	}
	return lg, err
}
