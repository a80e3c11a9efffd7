package gcpolicy

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/toolhost/toolhost/config"
)

// fakeRoot writes files (paths relative to the root) into a fresh
// directory and returns it.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const meminfo16G = "MemTotal:       16777216 kB\nMemFree:         1000000 kB\n"

func TestDetectBudget(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  budget
		ok    bool
	}{
		{"cgroup v2", map[string]string{
			"proc/self/cgroup": "0::/system.slice/toolhost.service\n",
			"sys/fs/cgroup/system.slice/toolhost.service/memory.max": "2147483648\n",
			"sys/fs/cgroup/system.slice/memory.max":                  "max\n",
			"proc/meminfo":                                           meminfo16G,
		}, budget{2 << 30, "cgroup memory.max 2GiB"}, true},
		{"cgroup v2, the lower limit of an ancestor", map[string]string{
			"proc/self/cgroup":             "0::/a/b\n",
			"sys/fs/cgroup/a/b/memory.max": "max\n",
			"sys/fs/cgroup/a/memory.max":   "1073741824\n",
			"proc/meminfo":                 meminfo16G,
		}, budget{1 << 30, "cgroup memory.max 1GiB"}, true},
		{"cgroup v2, no limit", map[string]string{
			"proc/self/cgroup":                    "0::/user.slice\n",
			"sys/fs/cgroup/user.slice/memory.max": "max\n",
			"proc/meminfo":                        meminfo16G,
		}, budget{8 << 30, "half of MemTotal 16GiB"}, true},
		{"cgroup v1, a container without a cgroup namespace", map[string]string{
			// The path names the container's cgroup on the host; the mount
			// shows that cgroup at its root.
			"proc/self/cgroup":                           "12:pids:/docker/abc\n4:cpu,memory:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912\n",
			"proc/meminfo":                               meminfo16G,
		}, budget{512 << 20, "cgroup memory.limit_in_bytes 512MiB"}, true},
		{"cgroup v1, unlimited (a page-rounded MaxInt64)", map[string]string{
			"proc/self/cgroup": "4:memory:/process_api/x\n0::/\n",
			"sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":               "9223372036854771712\n",
			"proc/meminfo": meminfo16G,
		}, budget{8 << 30, "half of MemTotal 16GiB"}, true},
		{"a cgroup limit above the machine's memory", map[string]string{
			"proc/self/cgroup":             "0::/big\n",
			"sys/fs/cgroup/big/memory.max": "34359738368\n",
			"proc/meminfo":                 meminfo16G,
		}, budget{8 << 30, "half of MemTotal 16GiB"}, true},
		{"a cgroup limit and no meminfo", map[string]string{
			"proc/self/cgroup":           "0::/c\n",
			"sys/fs/cgroup/c/memory.max": "805306368\n",
		}, budget{768 << 20, "cgroup memory.max 768MiB"}, true},
		{"nothing to read", nil, budget{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := detectBudget(fakeRoot(t, c.files))
			if got != c.want || ok != c.ok {
				t.Errorf("detectBudget = %+v, %v; want %+v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// TestDecide: the environment wins over the config, the config over the
// defaults; policy "go" sets nothing.
func TestDecide(t *testing.T) {
	cgroup2G := map[string]string{
		"proc/self/cgroup":             "0::/svc\n",
		"sys/fs/cgroup/svc/memory.max": "2147483648\n",
		"proc/meminfo":                 meminfo16G,
	}
	for _, c := range []struct {
		name    string
		cfg     config.GC
		env     map[string]string
		files   map[string]string
		percent int
		limit   int64
		log     string
	}{
		{"defaults", config.GC{}, nil, cgroup2G, 100, 1536 << 20,
			"percent=100-1600, for 32MiB of garbage between collections (default) memory_limit=1.5GiB (75% of cgroup memory.max 2GiB)"},
		{"a small budget: a quarter of the limit as headroom", config.GC{MemoryBudget: 128 << 20}, nil, cgroup2G, 100, 96 << 20,
			"percent=100-1600, for 24MiB of garbage between collections (default) memory_limit=96MiB (75% of memory_budget 128MiB)"},
		{"config", config.GC{Policy: "server", Percent: 800, MemoryBudget: 1 << 30}, nil, cgroup2G, 800, 768 << 20,
			"percent=800 (config) memory_limit=768MiB (75% of memory_budget 1GiB)"},
		{"GOGC", config.GC{Percent: 800}, map[string]string{"GOGC": "200"}, cgroup2G, 0, 1536 << 20,
			"percent=200 (GOGC) memory_limit=1.5GiB (75% of cgroup memory.max 2GiB)"},
		{"GOMEMLIMIT", config.GC{MemoryBudget: 1 << 30}, map[string]string{"GOMEMLIMIT": "3GiB"}, cgroup2G, 100, 0,
			"percent=100-1600, for 32MiB of garbage between collections (default) memory_limit=3GiB (GOMEMLIMIT)"},
		{"GOGC not a number: the policy, said", config.GC{}, map[string]string{"GOGC": "abc"}, cgroup2G, 100, 1536 << 20,
			`percent=100-1600, for 32MiB of garbage between collections (default) (GOGC="abc" ignored: neither a number nor off) memory_limit=1.5GiB (75% of cgroup memory.max 2GiB)`},
		{"GOGC not a number, policy go", config.GC{Policy: "go"}, map[string]string{"GOGC": "4x"}, cgroup2G, 100, 0,
			`percent=100 (policy "go") (GOGC="4x" ignored: neither a number nor off) memory_limit=none (policy "go")`},
		{"both", config.GC{}, map[string]string{"GOGC": "off", "GOMEMLIMIT": "1GiB"}, cgroup2G, 0, 0,
			"percent=off (GOGC) memory_limit=1GiB (GOMEMLIMIT)"},
		{"policy go", config.GC{Policy: "go"}, nil, cgroup2G, 0, 0,
			`percent=100 (policy "go") memory_limit=none (policy "go")`},
		{"policy go, GOGC", config.GC{Policy: "go"}, map[string]string{"GOGC": "300"}, cgroup2G, 0, 0,
			`percent=300 (GOGC) memory_limit=none (policy "go")`},
		{"no budget", config.GC{}, nil, nil, 0, 0,
			"percent=100 (Go's default: no memory limit to bound more) memory_limit=none (no memory budget found: set gc { memory_budget })"},
		{"no budget, a percent configured", config.GC{Percent: 300}, nil, nil, 300, 0,
			"percent=300 (config) memory_limit=none (no memory budget found: set gc { memory_budget })"},
		{"no budget detected, one configured", config.GC{MemoryBudget: 4 << 30}, nil, nil, 100, 3 << 30,
			"percent=100-1600, for 32MiB of garbage between collections (default) memory_limit=3GiB (75% of memory_budget 4GiB)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Decide(c.cfg, func(k string) string { return c.env[k] }, fakeRoot(t, c.files))
			if p.Percent != c.percent || p.Limit != c.limit || p.String() != c.log {
				t.Errorf("Decide = %d, %d, %q; want %d, %d, %q", p.Percent, p.Limit, p.String(), c.percent, c.limit, c.log)
			}
		})
	}
}

// TestApply sets a policy on this process, then puts Go's figures back
// with the policy Apply returned.
func TestApply(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	debug.SetGCPercent(percent)
	undo := Policy{Percent: 250, Limit: 900 << 20}.Apply()
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })
	if undo != (Policy{Percent: percent, Limit: limit}) {
		t.Errorf("Apply returned %+v, want the figures it replaced: %d, %d", undo, percent, limit)
	}
	if got := debug.SetGCPercent(250); got != 250 {
		t.Errorf("GC percent %d, want 250", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 900<<20 {
		t.Errorf("memory limit %d, want %d", got, 900<<20)
	}
	Policy{}.Apply() // leaves both
	if got := debug.SetGCPercent(250); got != 250 {
		t.Errorf("GC percent %d after an empty policy, want 250", got)
	}
	undo.Apply()
	if p, l := debug.SetGCPercent(percent), debug.SetMemoryLimit(-1); p != percent || l != limit {
		t.Errorf("undo left %d, %d; want %d, %d", p, l, percent, limit)
	}
}

// TestTuner: with a headroom, the percent is set after each collection
// for the live heap it left: headroom × 100 / live, between the floor and
// maxPercent; the undo stops the tuner and puts the percent back.
func TestTuner(t *testing.T) {
	before := debug.SetGCPercent(100)
	debug.SetGCPercent(before)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	percent := func() int {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}
	// settle collects until the tuner has run for the heap as it is.
	settle := func(want func(int) bool) int {
		t.Helper()
		for range 50 {
			runtime.GC()
			if p := percent(); want(p) {
				return p
			}
		}
		t.Fatalf("the percent is %d after 50 collections", percent())
		return 0
	}
	undo := Policy{Percent: 100, Headroom: 64 << 20}.Apply()
	// A small live heap: the most the tuner sets.
	if p := settle(func(p int) bool { return p == maxPercent }); p != maxPercent {
		t.Errorf("a small heap: percent %d, want %d", p, maxPercent)
	}
	// 128 MiB live: 64 MiB of headroom is 50 %, below the floor.
	live := make([][]byte, 128)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	if p := settle(func(p int) bool { return p == 100 }); p != 100 {
		t.Errorf("128 MiB live: percent %d, want the floor, 100", p)
	}
	// 24 MiB live: about 266 %.
	clear(live[24:])
	live = live[:24]
	if p := settle(func(p int) bool { return p > 200 && p < 300 }); p < 200 || p > 300 {
		t.Errorf("24 MiB live: percent %d, want about 266", p)
	}
	runtime.KeepAlive(live)
	undo.Apply()
	for range 3 {
		runtime.GC()
	}
	if p := percent(); p != before {
		t.Errorf("after the undo: percent %d, want %d back", p, before)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{100: "100B", 12 << 10: "12KiB", 768 << 20: "768MiB", 1536 << 20: "1.5GiB", 16 << 30: "16GiB"} {
		if got := size(n); got != want {
			t.Errorf("size(%d) = %q, want %q", n, got, want)
		}
	}
}
