// Package gcpolicy sets the garbage collector of a server process
// (`toolhost serve`, `toolhost mcp`) from the config's gc block: a fixed
// allowance of garbage between collections (the percent set anew after
// each one, never below Go's 100) or a configured percent, bounded by a
// soft memory limit at a share of the process's memory budget, which is
// configured or detected (the memory limit of its cgroup, else half of the
// machine's memory). GOGC and GOMEMLIMIT in the environment win over both.
package gcpolicy

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/toolhost/toolhost/config"
)

// Policy is what [Decide] chose: what to set, and what each figure is and
// where it came from, for the log.
type Policy struct {
	// Percent is the GC percent to set; 0 leaves the runtime's (GOGC's, or
	// Go's 100), and a negative one turns the collector off (as GOGC=off).
	Percent int
	// Headroom, when above 0, is the garbage allowed between collections,
	// in bytes: after each collection the percent is set anew (Apply) so
	// that the next comes once the heap has grown by Headroom, never
	// before it has grown by Percent % of the live heap (nor after
	// [maxPercent] %).
	Headroom int64
	// Limit is the soft memory limit to set, in bytes; 0 leaves the
	// runtime's (GOMEMLIMIT's, or none).
	Limit          int64
	percent, limit string
	tuner          *tuner // the tuner Apply started, which its undo stops
}

// maxPercent bounds the percent the headroom sets: a host whose live heap
// is tiny collects at least once it has grown seventeenfold.
const maxPercent = 1600

// budget is the memory a process may use, and where that figure came from.
type budget struct {
	bytes int64
	from  string // such as "cgroup memory.max 2GiB" or "half of MemTotal 15.6GiB"
}

// Decide chooses the policy for cfg. getenv looks up GOGC and GOMEMLIMIT
// (each, when set, is the runtime's already and is left alone); root is
// the file system the budget is detected under ("/" but in tests). A
// detection that finds no budget leaves Go's defaults, but for a percent
// the config names.
func Decide(cfg config.GC, getenv func(string) string, root string) Policy {
	var p Policy
	goDefaults := cfg.Policy == "go"
	var b budget
	var found bool
	switch {
	case goDefaults:
	case cfg.MemoryBudget > 0:
		b, found = budget{cfg.MemoryBudget, "memory_budget " + size(cfg.MemoryBudget)}, true
	default:
		b, found = detectBudget(root)
	}
	envLimit := getenv("GOMEMLIMIT")
	switch {
	case envLimit != "":
		p.limit = envLimit + " (GOMEMLIMIT)"
	case goDefaults:
		p.limit = `none (policy "go")`
	case !found:
		p.limit = "none (no memory budget found: set gc { memory_budget })"
	default:
		p.Limit = b.bytes/100*config.GCLimitShare + b.bytes%100*config.GCLimitShare/100
		p.limit = fmt.Sprintf("%s (%d%% of %s)", size(p.Limit), config.GCLimitShare, b.from)
	}
	env := getenv("GOGC")
	var ignored string // a GOGC the runtime reads as 100, which the policy replaces
	if _, err := strconv.Atoi(env); env != "" && env != "off" && err != nil {
		ignored, env = env, ""
	}
	switch {
	case env != "":
		p.percent = env + " (GOGC)"
	case goDefaults:
		p.percent = `100 (policy "go")`
	case cfg.Percent > 0:
		p.Percent, p.percent = cfg.Percent, strconv.Itoa(cfg.Percent)+" (config)"
	case !found && envLimit == "":
		p.percent = "100 (Go's default: no memory limit to bound more)"
	default:
		p.Percent, p.Headroom = config.DefaultGCPercent, config.GCHeadroom
		if p.Limit > 0 {
			p.Headroom = min(p.Headroom, p.Limit/4)
		}
		p.percent = fmt.Sprintf("%d-%d, for %s of garbage between collections (default)", p.Percent, maxPercent, size(p.Headroom))
	}
	if ignored != "" {
		p.percent += fmt.Sprintf(" (GOGC=%q ignored: neither a number nor off)", ignored)
		if p.Percent == 0 {
			p.Percent = 100 // what the runtime runs, said
		}
	}
	return p
}

// Apply sets p's percent and memory limit on the runtime, leaving what p
// leaves, and returns the policy that puts back what it changed. With a
// headroom it starts a tuner, which the undo stops (it stops the tuner of
// the policy it undoes, then puts the figures back).
func (p Policy) Apply() (undo Policy) {
	if p.tuner != nil {
		p.tuner.stopped.Store(true)
	}
	if p.Percent != 0 {
		undo.Percent = debug.SetGCPercent(p.Percent)
	}
	if p.Limit != 0 {
		undo.Limit = debug.SetMemoryLimit(p.Limit)
	}
	if p.Headroom > 0 {
		undo.tuner = &tuner{headroom: p.Headroom, floor: p.Percent, percent: p.Percent}
		undo.tuner.tune()
		undo.tuner.arm()
	}
	return undo
}

// tuner sets the GC percent after each collection from the live heap, so
// that the next collection comes once the heap has grown by headroom:
// Go offers a percent of the live heap and a limit, no fixed allowance.
// A finalizer tells it that a collection ran (as TiDB's and ByteDance's
// gctuner do): the sentinel it arms becomes garbage at once, and the
// collection that finds it runs the finalizer, which arms the next.
type tuner struct {
	headroom int64
	floor    int         // the lowest percent it sets
	percent  int         // the percent it set last; only the finalizer goroutine touches it
	stopped  atomic.Bool // set by the undo: the finalizer arms no more
	live     [1]metrics.Sample
}

// sentinel is what the tuner's finalizer is set on: large enough, and
// holding a pointer, so that it is allocated on its own (a tiny
// allocation's finalizer may never run).
type sentinel struct {
	_ [16]byte
	_ *int
}

// arm sets a finalizer on a new sentinel that tunes and arms again, unless
// the tuner is stopped.
func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if t.stopped.Load() {
			return
		}
		t.tune()
		t.arm()
	})
}

// tune sets the percent for the live heap the last collection left.
func (t *tuner) tune() {
	t.live[0].Name = "/gc/heap/live:bytes"
	metrics.Read(t.live[:])
	pct := maxPercent
	if live := t.live[0].Value.Uint64(); live > 0 {
		pct = int(max(int64(t.floor), min(int64(maxPercent), t.headroom*100/int64(live))))
	}
	if pct != t.percent {
		t.percent = pct
		debug.SetGCPercent(pct)
	}
}

// String says what p sets and why, as serve logs it: "percent=200
// (default) memory_limit=1.5GiB (75% of cgroup memory.max 2GiB)".
func (p Policy) String() string {
	return "percent=" + p.percent + " memory_limit=" + p.limit
}

// detectBudget reads the memory budget of this process from the files
// under root: the lowest memory limit of its cgroup and the cgroup's
// ancestors (cgroup v2's memory.max, v1's memory.limit_in_bytes) when it
// is below the machine's memory; else half of /proc/meminfo's MemTotal,
// since a machine without a limit for the host is shared with the rest of
// it. It reports false when neither is found.
func detectBudget(root string) (budget, bool) {
	total := memTotal(root)
	if limit, file := cgroupLimit(root); limit > 0 && (total == 0 || limit < total) {
		return budget{limit, "cgroup " + file + " " + size(limit)}, true
	}
	if total > 0 {
		return budget{total / 2, "half of MemTotal " + size(total)}, true
	}
	return budget{}, false
}

// cgroupLimit is the lowest memory limit of the process's cgroups (as
// /proc/self/cgroup names them) and their ancestors, and the file it was
// read from; 0 when none has one. A cgroup's path that is not under the
// mount (a container without a cgroup namespace sees its own cgroup at the
// mount's root) is found by the walk up.
func cgroupLimit(root string) (limit int64, file string) {
	b, _ := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		var dir, name string
		switch {
		case len(f) < 3:
			continue
		case f[0] == "0" && f[1] == "":
			dir, name = "sys/fs/cgroup", "memory.max"
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			dir, name = "sys/fs/cgroup/memory", "memory.limit_in_bytes"
		default:
			continue
		}
		for p := path.Clean("/" + f[2]); ; p = path.Dir(p) {
			if n := readLimit(filepath.Join(root, dir, p, name)); n > 0 && (limit == 0 || n < limit) {
				limit, file = n, name
			}
			if p == "/" {
				break
			}
		}
	}
	return limit, file
}

// readLimit reads a cgroup's memory limit file: 0 when it is absent, "max"
// or unreadable.
func readLimit(file string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// memTotal is /proc/meminfo's MemTotal in bytes, 0 when unknown.
func memTotal(root string) int64 {
	f, err := os.Open(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// size writes n bytes for a person: "1.5GiB", "768MiB", "12KiB", "100B".
func size(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n), 0
	for ; v >= 1024 && i < len(units)-1; i++ {
		v /= 1024
	}
	return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0") + units[i]
}
