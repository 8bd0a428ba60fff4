// Package e2e holds strom's end-to-end tests: the example services run as separate OS
// processes over one log directory, the way a user runs them, and the tests check what they
// did from the outside (their /stats, the consumers' --out files, the log itself).
//
// TestMain builds examples/publisher, examples/consumer and examples/check once into a
// temporary folder, without the race detector (the children run at full speed; the test
// binary itself may run with -race).
//
// # Real input
//
// TestRealInputSurvivesSIGKILL publishes each of the five Loghub samples in
// ../shared/data/loghub (2,000 lines each; STROM_LOGHUB overrides the folder) into a
// 3-partition topic, keyed as the folder's README suggests, consumes it with three consumer
// processes, kills one of them with SIGKILL mid-way and restarts it on the same checkpoint
// folder, and checks that every line was handled at least once, byte for byte, that nothing
// was invented, and that each partition's final position equals what was written to it. The
// folder is required: a missing folder fails the test, it is never skipped.
package e2e
