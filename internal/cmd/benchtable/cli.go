package main

// cliRows are issue 8's figures for the strom command, from cmd/strom's
// BenchmarkCLI: the built binary producing a ~200 MB file of Loghub lines and
// consuming its partition to /dev/null, each beside the old tool's loop
// (one Append, or one write syscall, per record) run in the same benchmark.
func cliRows() []row {
	return []row{
		{figure: "strom produce from a file (200 MB of Loghub lines)", bench: "BenchmarkCLI/produce/strom", unit: "records/s",
			baseline: "BenchmarkCLI/produce/old", baseUnit: "records/s", target: ">= 10x old", minRatio: 10, formatter: rate},
		{figure: "strom consume of a partition to /dev/null", bench: "BenchmarkCLI/consume/strom", unit: "records/s",
			baseline: "BenchmarkCLI/consume/old", baseUnit: "records/s", target: ">= 10x old", minRatio: 10, formatter: rate},
		{figure: "strom consume --format json to /dev/null", bench: "BenchmarkCLI/consume/strom-json", unit: "records/s",
			baseline: "BenchmarkCLI/consume/old", baseUnit: "records/s", formatter: rate},
	}
}
