// Package metrics serves what strom reports to OpenTelemetry as a Prometheus /metrics
// endpoint, in one call:
//
//	h, err := metrics.Handler("billing") // once, before the pipelines' Run
//	if err != nil {
//		return err
//	}
//	mux.Handle("GET /metrics", h)
//
// strom's logs and pipelines report to an OpenTelemetry MeterProvider
// (go.opentelemetry.io/otel), the global one unless told otherwise, which discards
// everything until a program installs one. [Handler] installs one as the global provider,
// read by the OpenTelemetry Prometheus exporter (go.opentelemetry.io/otel/exporters/prometheus)
// into a Prometheus registry of its own, beside the Go runtime (go_*) and process
// (process_*) collectors, and returns the handler that serves that registry. [NewProvider]
// builds the same without installing it, for a program that wires OpenTelemetry itself.
// The package imports only OpenTelemetry and the Prometheus client, none of strom's other
// packages; the series below are those packages log and stream report.
//
// # When to call Handler
//
// Call [Handler] once, early in main, before any pipeline runs. A log reports to the global
// provider it found at log.Open, and the global provider forwards to the one installed
// later, so a log opened before the call reports too. A pipeline looks for a provider when
// its Run starts: one that starts with none installed builds no telemetry at all (it pays a
// nil check per stage and batch), and reports nothing until it runs again (stream.Forever
// and stream.ConsumeForever start a new run after each source failure). Later calls of
// Handler return the same handler, so two parts of a program may each call it; the
// service name of the first call is kept.
//
// # Handler or NewProvider
//
// [Handler] is for a service that has one Prometheus endpoint and no other OpenTelemetry
// setup: it owns the global MeterProvider, replacing one installed before, and never shuts
// it down (a pull exporter keeps nothing to flush). [NewProvider] touches nothing global
// and returns the *sdkmetric.MeterProvider with the handler: pass it to
// log.WithMeterProvider and stream.WithMeterProvider, or install it yourself with
// otel.SetMeterProvider; add readers (an OTLP push exporter) or views (other histogram
// buckets) through its sdkmetric options; shut it down when done. Tests use it to keep
// their series apart. Both return the handler of promhttp.HandlerFor with default options
// (a failed collection answers 500); the caller mounts it (any path) and serves it.
//
// # Prometheus names
//
// The exporter turns an OpenTelemetry name into a Prometheus one (its
// UnderscoreEscapingWithSuffixes strategy, which NewProvider names so that a change of the
// exporter's default does not rename the series):
//
//   - dots, and any other character Prometheus does not allow, become underscores, in
//     metric and attribute names alike: messaging.destination.name is the label
//     messaging_destination_name;
//   - the unit is appended: "s" as _seconds, "By" as _bytes; a unit in braces ({record},
//     {offset}) is a count and adds nothing;
//   - a counter gets _total; a histogram is served as _bucket (with le), _sum and _count.
//
// So strom.stage.records.in (a counter of {record}) is strom_stage_records_in_total,
// strom.log.bytes (a counter of By) is strom_log_bytes_total, strom.partition.lag (a gauge)
// stays strom_partition_lag, and strom.checkpoint.duration (a histogram in s) is
// strom_checkpoint_duration_seconds_bucket, _sum and _count.
//
// Every series also carries the labels otel_scope_name (the reporting package's ScopeName,
// github.com/strom-dev/strom/log or github.com/strom-dev/strom/stream), otel_scope_version
// and otel_scope_schema_url (both empty). The series target_info (value 1) carries the
// resource: service_name (the service argument) and telemetry_sdk_*.
//
// # The series strom reports
//
// Package stream ("Metrics and traces") and package log ("Metrics") define each
// instrument; this is what a scrape shows. A pipeline's series carry
// messaging_consumer_group_name, its stream.WithName (left out when unnamed: give every
// pipeline of a process its own name, or their series add up).
//
// Per stage of a pipeline, with strom_stage (the stage's name: "map", "filter", "tap", ...
// or what stream.Name gave) and strom_stage_index (its place from the source, 0 first):
//
//	strom_stage_records_in_total             counter    records that entered the stage
//	strom_stage_records_out_total            counter    records it passed on (a filter's kept ones, a flat-map's outputs)
//	strom_stage_records_skipped_total        counter    records dropped by stream.Skip after the function failed
//	strom_stage_records_dead_lettered_total  counter    records written to the stream.DeadLetter sink
//	strom_stage_failures_total               counter    calls of the function (a sink: Writes) that failed, retries included
//	strom_stage_retries_total                counter    calls that were retries, failed or not
//	strom_stage_records_late_total           counter    a window's late records
//	strom_stage_duration_seconds             histogram  one value per batch: the function over the batch (not for Parallel and KeyOrdered stages)
//
// Per partition a pipeline reads, with messaging_system="strom", messaging_destination_name
// (the topic) and messaging_destination_partition_id (the partition, as a string):
//
//	messaging_client_consumed_messages_total counter    records read, again when read again after a restart
//	messaging_process_duration_seconds       histogram  one value per source batch: until it passed every stage or reached a Parallel, KeyOrdered or Batch one (also messaging_operation_name and _type "process")
//	strom_partition_position                 gauge      the lowest offset not yet finished: what the next checkpoint saves, where a restart resumes
//	strom_partition_high_watermark           gauge      the partition's next offset, from sources that know it (source.Partition, source.Topic, source.Kafka)
//	strom_partition_lag                      gauge      high watermark minus position: records not yet finished
//	strom_partition_stalled                  gauge      1 while the partition is stalled: behind, and no progress for stream.StallAfter (30 s), else 0
//
// The four gauges are served only while the pipeline runs; the counters keep their final
// values after Run returns, and the next run of the same name adds to them.
//
// Per pipeline that saves positions (Checkpointing), with messaging_system="strom":
//
//	strom_checkpoint_saves_total             counter    rounds of saves (every position that moved, to every store) that succeeded
//	strom_checkpoint_failures_total          counter    rounds that failed, which stops the pipeline (error_type="_OTHER")
//	strom_checkpoint_duration_seconds        histogram  one value per round, failed ones with error_type="_OTHER"
//
// Per partition a log of this process can write (a topic it created or opened for
// writing; a log opened with log.ReadOnly reports none), with messaging_system="strom",
// messaging_operation_name="append", messaging_destination_name and
// messaging_destination_partition_id:
//
//	messaging_client_sent_messages_total     counter    records appended since the log was opened
//	strom_log_bytes_total                    counter    bytes of their frames (header, body, padding)
//	strom_log_syncs_total                    counter    syncs of the active segment
//	strom_log_sync_duration_seconds          histogram  one value per sync: the fdatasync or msync
//
// Histograms of the pipeline have buckets from 10 µs to 10 s, those of the log from 50 µs
// to 1 s. A useful first alert is on strom_partition_stalled being 1, on strom_partition_lag rising, or on
// strom_checkpoint_saves_total standing still while strom_stage_records_in_total moves.
//
// The counters and gauges cost a record nothing: they read what the log and the pipeline
// count anyway when the exporter collects, that is, when /metrics is scraped. Durations are
// taken per batch or per sync, never per record.
package metrics
