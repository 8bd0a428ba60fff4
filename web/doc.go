// Package web serves live, read-only pages for operators: what a log
// directory holds and how far its consumers are behind, and what a running
// pipeline is doing. Each page is one [net/http.Handler] a program mounts in
// one line; its HTML, script and style are embedded in the binary (no
// outside assets, no CDN, no framework), and it updates itself from a
// Server-Sent Events stream at least once a second.
//
// # The log page
//
// [NewLogPage] opens a log directory read-only (log.Open with log.ReadOnly:
// it takes no lock and never writes, so it runs beside the writing process)
// and serves, for every topic, each partition's log start offset, next
// offset (the high watermark), segment count and bytes, and its append rate
// in records per second as a sparkline of the last minutes; and every
// consumer position saved in the checkpoint folders it was given
// ([WithStateDirs]: checkpoint.FileStore folders, one
// <topic>-<partition>.position file each) with its lag, the high watermark
// minus the position. `strom serve` is this page on a port:
//
//	page, err := web.NewLogPage("/var/lib/app/log", web.WithStateDirs("/var/lib/app/state"))
//	if err != nil {
//		return err
//	}
//	defer page.Close()
//	mux.Handle("/log/", http.StripPrefix("/log", page))
//
// The page's paths, relative to where it is mounted:
//
//	/               the HTML page (text/html)
//	/log.js         its script (text/javascript)
//	/log.css        its style (text/css)
//	/snapshot.json  one snapshot, taken when asked (a LogSnapshot, application/json)
//	/events         a snapshot each sample interval (text/event-stream, event "snapshot")
//
// The page links its script, style and event stream by relative URLs, so it
// works under any prefix that ends in "/" (http.StripPrefix as above). Each
// path takes one optional query parameter, topic=NAME, which keeps only that
// topic and its positions. Anything else is refused with a short plain-text
// message and never a stack: another path is 404, another method than GET or
// HEAD 405 with an Allow header, an unknown or repeated parameter or a topic
// name that breaks Kafka's rule 400 naming the parameter, a topic the log
// does not have 404.
//
// # Sampling
//
// A goroutine the page owns takes a snapshot once a sample interval
// ([WithSampleInterval], 1 s by default): it reads every partition's figures
// (as `strom topics describe` does: log.Partition.StartOffset,
// HighWatermark and Segments), turns the high watermark's rise since the
// previous sample into a rate, keeps the last [WithHistory] rates per
// partition (300 by default: five minutes at 1 s) and pushes the snapshot to
// every open event stream. [LogPage.Close] stops it and ends the streams.
// A damaged partition, a missing state folder or a position file that does
// not parse is shown on the page as an error, next to what could be read.
//
// # What the rendered page holds
//
// The script draws each snapshot into tables whose cells a browser test
// can read: a partition is a row <tr data-topic="T" data-partition="N">
// in #partitions-body, a position a row <tr data-state="DIR"
// data-topic="T" data-partition="N"> in #positions-body; each figure is a
// cell with data-field (logStartOffset, nextOffset, segments, bytes, rate,
// rates, position, lag, note; a topic's read error is data-field="error")
// and, where its text is formatted (bytes as KiB), data-value with the
// raw number. body[data-snapshots] counts the snapshots drawn and
// body[data-time] is the time of the last one; #status says "live" while
// the event stream is connected.
//
// # The pipeline page
//
// [Pipeline] serves what a running pipeline is doing, from
// [stream.Stream.Observe].
//
// A program mounts it in one line, with any prefix that ends in "/":
//
//	page := web.Pipeline(p) // p is the *stream.Stream whose Run runs
//	defer page.Close()
//	mux.Handle("/ui/", http.StripPrefix("/ui", page))
//
// Its paths, relative to where it is mounted:
//
//	/               the HTML page (text/html)
//	/pipeline.js    its script (text/javascript)
//	/pipeline.css   its style (text/css)
//	/snapshot.json  one snapshot, taken when asked ([PipelineSnapshot], application/json)
//	/events         a snapshot each sample interval (text/event-stream, event "snapshot")
//
// The page shows the chain of stages with their counts, records per second
// in and out, records in flight ([stream.StageSnapshot].InFlight), how much
// of each second each was busy, back-pressured and idle, colour-coded as
// Flink's web UI does (busy from blue to red, back-pressure grey to black,
// idle blue; a stage that is not timed, a windowed join, grey without a
// bar), and for an event-time stage (a Window, a windowed join) its
// watermark; each source partition with its position, high watermark, lag,
// records in flight, records per second as a sparkline of the last
// samples, time since its last progress, whether it is stalled, and one
// column per event-time stage with the partition's watermark in it,
// marked idle while the stage counts the partition idle
// ([stream.PartitionWatermark]); the last checkpoints; and the last errors
// with their records' lineage. Watermarks are shown as UTC dates and times
// with milliseconds. Its HTML carries stable hooks for tests and scripts:
// each stage is an element with data-stage="INDEX" whose figures are
// elements with data-field="in", "out", "inFlight", "busy", "watermark",
// ...; each partition is a row with data-topic and data-partition whose
// cells have data-field "position", "highWatermark", "lag", ..., and
// "watermark" (one per event-time stage, with data-watermark-stage="INDEX",
// data-ms the watermark in milliseconds since the Unix epoch or "" for
// none, and data-idle "true" or "false"). The JSON names every field in
// camelCase (stages[].name, stages[].in, ...), watermarks in milliseconds
// since the Unix epoch (watermarkMs).
//
// Each path takes one optional query parameter, topic=NAME, which keeps
// only that topic's partitions. Anything else is refused with a short
// plain-text message and never a stack: another path is 404, another method
// than GET or HEAD 405 with an Allow header, an unknown or repeated
// parameter or a topic name that breaks Kafka's rule 400 naming the
// parameter.
package web
