// Package scaledemo runs examples/sshwatch on several processes of one
// Kafka consumer group, over an in-process Kafka, and checks that together
// they print the alerts sshwatch prints on one process: issue 18's
// "make demo-scale" (internal/cmd/demoscale) and its Repartition case
// (this package's test).
//
// # What a run does
//
//  1. It runs sshwatch on one process over the file (sshwatch --input FILE
//     --json --dir DIR/one-process), as a user would: its alerts, and its
//     windows.jsonl, are what the workers must print together.
//  2. It starts an in-process Kafka (franz-go's kfake, through package
//     kafkatest; TCP on 127.0.0.1) with the topic "ssh" of
//     Config.Partitions (6) partitions, and Config.Workers (3) sshwatch
//     processes in Kafka mode (sshwatch --brokers ... --group sshwatch),
//     each a member of the group, with 2 s session and rebalance timeouts.
//  3. It produces the file's lines, a chunk of 100 at a time, at most 300
//     ahead of the group's commits, so that the lines flow through what
//     follows. Each line is keyed by its source IP (a failed password
//     attempt's, cut from the line by hand; other lines by their number),
//     and the workers declare that their window's key follows the
//     partitioning; or, with Config.Repartition, by its line number, so
//     that an IP's lines reach every partition, and the workers count
//     through a repartition topic keyed by IP (sshwatch --repartition:
//     stream.Repartition over source.KafkaSource.Through).
//  4. Once the group has committed a third of the lines (Config.KillAt)
//     and is Stable with every worker owning partitions, it produces one
//     more chunk and kills a worker, chosen from Config.Seed, with
//     SIGKILL; it is not started again: its partitions, and their window
//     state (in changelog topics), move to the others. At two thirds
//     (Config.JoinAt), the group settled again, it starts one more worker:
//     a rebalance hands it partitions, and their state, from the others.
//  5. Once every line is committed it produces one sentinel per partition:
//     a failed password attempt a minute (with Repartition: a day and a
//     minute) after the file's last line, from an address of TEST-NET-1
//     that Kafka's partitioner puts in that partition, which closes every
//     window of the lines. When the sentinels are committed (with
//     Repartition: in the repartition topic too) it stops the workers with
//     SIGTERM; each must exit 0.
//  6. It compares the alerts the workers printed (their stdout, one file
//     each) and their windows.jsonl with the one-process run's: results
//     never printed (missing), printed for a window one process does not
//     print (extra), with another count (wrong), and printed more than once
//     (duplicates: at-least-once, after a kill or a rebalance, not a
//     failure); and it counts the late lines the workers warned about.
//
// Everything waits on conditions (the group's commits, its state, a
// worker's ready line on stderr), polled every 20 ms; a run whose commits
// stay still for Config.Stall (a minute) fails, naming the commits and
// the group's members.
//
// Why the sentinels wait for every line, and why a day of out-of-order
// with Repartition: a window stage keeps a watermark per partition, and a
// partition of the repartition topic holds the lines of every worker in
// the order they arrive, which after a kill is hours of this input's time
// apart. An out-of-order of a day lets none of them be late, and a
// sentinel written before another worker's last lines would make those
// late.
package scaledemo
