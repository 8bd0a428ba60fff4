// Command strom inspects and edits a strom log directory: topics, partitions
// and segments, the records in them, and the positions consumers saved.
//
// Install it with
//
//	go install github.com/strom-dev/strom/cmd/strom@latest
//
// and run "strom --help", or "strom COMMAND --help" for a command's flags and
// an example. It is built on github.com/spf13/cobra.
//
// # Commands
//
//	strom topics create TOPIC [--partitions N] [--retention-bytes B] [--retention D]
//	strom topics list [--json]
//	strom topics describe [TOPIC...] [--json]
//	strom produce TOPIC [--format raw|json] [--key K | --key-regex RE] [--partition P] [--print-offsets] [--keep-cr]
//	      [--timestamp-regex RE [--timestamp-format F] [--timestamp-location L] [--timestamp-year Y] [--timestamp-on-error fail|skip|ingest]] < input
//	strom consume TOPIC [--from earliest|latest|OFFSET|TIMESTAMP] [--partition P] [--follow] [--max N] [--format raw|json]
//	strom positions --state DIR [--json]
//	strom positions set --state DIR TOPIC PARTITION OFFSET|earliest|latest
//	strom dump SEGMENT_FILE [--json]
//	strom verify [TOPIC...] [--repair] [--json]
//	strom retention [TOPIC...]
//	strom serve [--state DIR]... [--addr HOST:PORT]
//
// # The log directory
//
// Every command that reads or writes a log takes its directory as --dir DIR,
// or from $STROM_DIR; there is no default (a mistyped or forgotten directory
// must not become a new, empty log). A missing directory is reported as
// missing, and only "topics create" creates one: "produce" to a directory or
// topic that does not exist fails and creates nothing. consume, topics list
// and describe, positions, serve and verify (without --repair) open the log
// read-only: they take no lock and read beside a running writer in another
// process. produce, topics create, retention, positions set and verify
// --repair write: produce, retention and verify --repair take the topic's
// writer lock, and fail naming the holder's pid while another process writes
// the topic. produce also refuses, appending nothing, a topic that an
// exactly-once pipeline writes (its folder holds sink.TransactionFile,
// exactly-once.txn): records appended by anything but the pipeline's
// sink.LogSink lie past the committed ends, and the sink's next start
// truncates them away.
//
// # Records on stdin and stdout
//
// produce reads stdin, never its arguments, so a line beginning with "-",
// "--" or "-key=x" is data like any other. Raw input is one record per line:
// the value is the line's bytes without its line ending, the '\n' and one
// '\r' right before it (the rule of bufio.ScanLines and of source.Lines, so
// the same file gives the same values through either), everything else kept,
// including a '\r' elsewhere in the line, NUL bytes and bytes that are not
// UTF-8. --keep-cr keeps the '\r' of a CRLF ending (source.KeepCR is the same
// rule); --key-regex matches the line without its ending either way, and
// produce ends by counting on stderr the lines it keyed and those it did not,
// with a warning naming the expression when it keyed none. A raw record's
// timestamp is the time of its append, or with --timestamp-regex the time
// written in its line (see "strom produce --help" for the formats, the year
// of a syslog time, and what a line without one, or with one over an hour
// ahead, does). consume's
// raw output writes each value's bytes exactly as stored and a '\n', so
// produce --keep-cr then consume gives back the input byte for byte (a final
// line without '\n' comes back with one), and produce then consume gives it
// back with LF line endings.
//
// --format json (both directions) is one JSON object per line:
//
//	{"topic":"events","partition":0,"offset":7,"timestamp":1764547200000,"key":"alice","value":"caf\u00e9"}
//	{"topic":"events","partition":0,"offset":8,"timestamp":1764547200000,"key":null,"value":"Y2Fm6Q==","valueEncoding":"base64"}
//
// It is lossless for any bytes: a key, value, header key or header value
// that is valid UTF-8 is a JSON string of exactly those bytes (NUL and
// control bytes as JSON escapes); anything else is standard base64
// (RFC 4648, padded) with "keyEncoding" or "valueEncoding" set to "base64"
// beside it. A nil key or value is null, an empty one "". Headers are
// [{"key":...,"value":...}] in order; timestamp is in milliseconds since the
// Unix epoch (0 or absent on produce: now). produce --format json reads what
// consume --format json prints (topic, partition and offset are ignored).
//
// # The live page
//
// serve serves the page of package web (web.NewLogPage) on --addr,
// 127.0.0.1:7080 by default: the log's partitions, the positions saved in
// each --state folder with their lag, and append rates, redrawn every
// second from a Server-Sent Events stream, with /snapshot.json for scripts.
// Once it listens it prints "serving on http://ADDR/ (log directory DIR,
// read-only; Ctrl-C stops)" and flushes stdout, so a script (or a test,
// with --addr 127.0.0.1:0) learns the port it got; SIGINT or SIGTERM ends
// the event streams and the server, with exit status 0. The page has no
// authentication: an --addr off loopback is served with a warning on
// stderr.
//
// # Exit status
//
//	0  success
//	1  an error: I/O, an unknown topic, a directory that is not a log, a
//	   topic locked by another writer, ...
//	2  a usage error: an unknown command or flag, a missing or bad argument
//	   (a negative partition, offset or count is one, and so are a topic
//	   name that breaks Kafka's rule and a partition number or count out
//	   of range, whichever command meets them)
//	3  corruption: verify or dump found a frame that fails its check or a
//	   partition that ends below its recovery point, any other command
//	   opened or read such a partition (consume, topics describe,
//	   positions: the read-only open applies the writer's rules, so no
//	   command shows fewer records where verify finds damage), or
//	   positions found position files that do not parse
//
// Errors are printed on stderr, once prefixed "strom: " (a message names
// its command only in a hint, "run 'strom consume --help'", or as the
// subject of its sentence), and name the file, partition, byte position and
// offset involved when there is one. An error naming damage in a segment is
// followed by a line pointing at "strom verify --repair".
//
// A directory is a log when it is empty (a new log) or holds at least one
// topic (a folder with a topic.json). A missing path, a file, and a
// directory that holds other things but no topic (dot files and lost+found
// aside) are not: every command but "topics create" fails on them (exit 1)
// instead of reading them as a log without topics.
//
// # Speed
//
// Output goes through a 256 KiB buffer, flushed when the command ends and,
// with consume --follow, after every batch (so nothing waits in it while
// consume waits for records). produce appends in batches of up to 8,192
// records or 4 MiB, one write per partition per batch; when stdin is a pipe
// or a terminal a batch also ends whenever no more input is waiting, so a
// slow producer's lines are appended as they come. BenchmarkCLI in
// bench_test.go measures both against the old tool's way (one write per
// record, one Append per record) on a ~200 MB input built from the Loghub
// samples:
//
//	go test -run '^$' -bench CLI -benchtime 1x ./cmd/strom/
package main
