// Package procstat reads the stat files of /proc, whose second field, the
// command's name in parentheses, may hold spaces and parentheses itself.
package procstat

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// File returns the fields of a process's or thread's stat file (such as
// /proc/PID/stat or /proc/self/task/TID/stat) after the command's name:
// the state first, so that field n of proc(5) is at index n-3. It returns
// nil when the file cannot be read.
func File(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	f := strings.Fields(s[i+1:])
	if len(f) == 0 {
		return nil
	}
	return f
}

// Of is [File] of process pid.
func Of(pid int) []string { return File("/proc/" + strconv.Itoa(pid) + "/stat") }

// Descendants returns the pids of the live processes below pid: its
// children, then theirs, and so on.
func Descendants(pid int) []int {
	children := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		f := File(path)
		if len(f) < 2 {
			continue
		}
		self, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], self)
	}
	var out []int
	for todo := []int{pid}; len(todo) > 0; todo = todo[1:] {
		out = append(out, children[todo[0]]...)
		todo = append(todo, children[todo[0]]...)
	}
	return out
}
