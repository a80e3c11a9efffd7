// Package proctest helps tests check on processes.
package proctest

import (
	"os"
	"strconv"
	"strings"
)

// Alive reports whether pid is a live process. A zombie counts as dead: it
// has exited and only waits to be reaped (in a container whose init does not
// reap orphans, it may wait forever).
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
