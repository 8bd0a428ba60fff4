package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// machinePrefix starts each line of the machine header in bench.out, from
// which a table rendered again (benchtable < bench.out) prints it.
const machinePrefix = "# machine: "

// machine is what the table's header says about where it ran, so that a
// figure in a note can be compared with another run's: a ratio that moved
// between two runs on different CPUs, or at different loads, says little
// about the code.
type machine struct {
	cpu       string // the model name in /proc/cpuinfo
	cores     int    // runtime.NumCPU
	kernel    string // /proc/sys/kernel/osrelease
	goVersion string
	commit    string // git rev-parse --short HEAD, "+dirty" when the tree has changes
	loadStart string // /proc/loadavg's 1, 5 and 15 minute averages at the start
	loadEnd   string // and at the end
	// cpuStart and cpuEnd are /proc/stat's first line at the start and
	// the end: the share of CPU time stolen by the hypervisor in between.
	cpuStart, cpuEnd cpuTimes
}

// cpuTimes are the jiffies of /proc/stat's "cpu" line: all of them and
// the steal column's.
type cpuTimes struct{ total, steal uint64 }

// cpuModel returns the first "model name" of a /proc/cpuinfo, "" if none.
func cpuModel(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAverage returns the 1, 5 and 15 minute load averages of a
// /proc/loadavg ("0.52 0.58 0.59 1/257 12345"), "?" if it has fewer fields.
func loadAverage(s string) string {
	f := strings.Fields(s)
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// parseCPUTimes reads /proc/stat's aggregate line ("cpu  user nice system
// idle iowait irq softirq steal guest guest_nice"); guest time is already
// counted in user, so the total leaves it out.
func parseCPUTimes(s string) (cpuTimes, error) {
	line, _, _ := strings.Cut(s, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("benchtable: /proc/stat's first line %q is not the cpu line", line)
	}
	var t cpuTimes
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("benchtable: /proc/stat cpu field %d %q: %w", i+1, s, err)
		}
		t.total += v
		if i == 7 {
			t.steal = v
		}
	}
	return t, nil
}

// stealPercent is the share of CPU time stolen between a and b, in percent.
func stealPercent(a, b cpuTimes) float64 {
	if b.total <= a.total {
		return 0
	}
	return 100 * float64(b.steal-a.steal) / float64(b.total-a.total)
}

func readFile(name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return ""
	}
	return string(b)
}

func readCPUTimes() cpuTimes {
	t, _ := parseCPUTimes(readFile("/proc/stat"))
	return t
}

// thisMachine reads the machine's description and the start figures.
func thisMachine() machine {
	m := machine{cores: runtime.NumCPU(), goVersion: runtime.Version(), kernel: strings.TrimSpace(readFile("/proc/sys/kernel/osrelease"))}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		m.cpu = cpuModel(f)
		f.Close()
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			m.commit += "+dirty"
		}
	}
	m.loadStart = loadAverage(readFile("/proc/loadavg"))
	m.cpuStart = readCPUTimes()
	return m
}

// finish takes the end figures.
func (m *machine) finish() {
	m.loadEnd = loadAverage(readFile("/proc/loadavg"))
	m.cpuEnd = readCPUTimes()
}

// lines is the header, one fact a line, without machinePrefix.
func (m machine) lines() []string {
	or := func(s string) string {
		if s == "" {
			return "?"
		}
		return s
	}
	ls := []string{
		fmt.Sprintf("cpu: %s, %d cores (runtime.NumCPU)", or(m.cpu), m.cores),
		fmt.Sprintf("kernel: %s; %s; commit %s", or(m.kernel), m.goVersion, or(m.commit)),
		fmt.Sprintf("load average (1, 5, 15 min): %s at the start, %s at the end", or(m.loadStart), or(m.loadEnd)),
	}
	if m.cpuEnd.total > 0 {
		ls = append(ls, fmt.Sprintf("cpu steal during the run: %.1f%%", stealPercent(m.cpuStart, m.cpuEnd)))
	}
	return ls
}
