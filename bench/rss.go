package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/toolhost/toolhost/internal/procstat"
)

// rssRow is the resident memory of one process (and optionally its descendants).
type rssRow struct {
	Name  string
	Pid   int
	KiB   int64 // VmRSS of the process
	Note  string
	Extra int64 // VmRSS summed over its descendants (a browser), in KiB
	PSS   int64 // Pss summed over its descendants, shared pages divided among them, in KiB
}

// vmRSS returns a process's VmRSS in KiB from /proc/PID/status.
func vmRSS(pid int) (int64, error) { return procField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:") }

// pss returns a process's proportional set size in KiB from /proc/PID/smaps_rollup.
func pss(pid int) (int64, error) { return procField(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:") }

// procField returns the "NAME:   123 kB" field of a /proc file in KiB.
func procField(file, name string) (int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", file, name)
}

// pluginProcess is the plugin's own process for the pid the host reports:
// that pid itself, or for a sandboxed plugin (the pid is bubblewrap's) the
// deepest process below it that runs the same executable as the first one
// that is not bubblewrap (the sandbox's stage, which becomes or starts the
// plugin).
func pluginProcess(pid int) (int, bool) {
	exe := func(p int) string { e, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); return e }
	if filepath.Base(exe(pid)) != "bwrap" {
		return pid, false
	}
	plugin, want := pid, ""
	for _, p := range procstat.Descendants(pid) { // breadth first: deeper ones last
		switch e := exe(p); {
		case e == "" || filepath.Base(e) == "bwrap":
		case want == "":
			plugin, want = p, e
		case e == want:
			plugin = p
		}
	}
	return plugin, true
}

// treeMem sums the VmRSS and the Pss of pid's descendants.
func treeMem(pid int) (rss, pssSum int64) {
	for _, p := range procstat.Descendants(pid) {
		if kib, err := vmRSS(p); err == nil {
			rss += kib
		}
		if kib, err := pss(p); err == nil {
			pssSum += kib
		}
	}
	return rss, pssSum
}

// measureRSS starts `toolhost serve` with the default config, calls the
// first-party plugins' tools (200 calls in all), and reads the RSS of the host
// and of each plugin; then it starts Chromium with one chrome call (on its
// blank page: the default network policy refuses loopback pages), when
// Chromium is installed, and reads the chrome plugin's again with its
// browser's.
func measureRSS(ctx context.Context, root, tmp string) ([]rssRow, error) {
	s, err := startServe(root, tmp, filepath.Join(root, "config.hcl"))
	if err != nil {
		return nil, err
	}
	defer s.stop()
	for range 50 {
		for _, c := range []struct {
			tool string
			args any
		}{
			{"get_workspace_info", map[string]any{}},
			{"list_files", map[string]any{"path": "."}},
			{"run_command", map[string]any{"command": "true"}},
			{"http_request", map[string]any{"url": s.base + "/healthz"}},
		} {
			// A tool may fail (no browser yet, a policy): its process still served the call.
			_, _ = s.call(ctx, c.tool, c.args)
		}
	}
	var plugins []struct {
		Name string `json:"name"`
		Pid  int    `json:"pid"`
	}
	if err := s.getJSON("/api/plugins", &plugins); err != nil {
		return nil, err
	}
	rows := []rssRow{{Name: "toolhost serve (host)", Pid: s.cmd.Process.Pid, Note: "default config, after 200 calls"}}
	chromePid := 0
	for _, p := range plugins {
		row := rssRow{Name: "plugin " + p.Name, Pid: p.Pid}
		if pid, confined := pluginProcess(p.Pid); confined {
			row.Pid, row.Note = pid, "sandboxed; "
		}
		if p.Name == "chrome" {
			chromePid = row.Pid
			row.Note += "no browser started"
		}
		rows = append(rows, row)
	}
	for i := range rows {
		if rows[i].KiB, err = vmRSS(rows[i].Pid); err != nil {
			return nil, err
		}
	}
	if chromePid == 0 {
		return rows, nil
	}
	t := time.Now()
	if _, err := s.call(ctx, "current_url", map[string]any{}); err != nil {
		rows = append(rows, rssRow{Name: "plugin chrome", Pid: chromePid, Note: "current_url failed (Chromium not installed?): " + err.Error()})
		return rows, nil
	}
	took := time.Since(t)
	time.Sleep(200 * time.Millisecond) // let the browser settle
	row := rssRow{Name: "plugin chrome", Pid: chromePid,
		Note: fmt.Sprintf("after one call (%s, Chromium started, a blank page)", fmtDur(took))}
	row.Extra, row.PSS = treeMem(chromePid)
	row.KiB, _ = vmRSS(chromePid)
	return append(rows, row), nil
}
