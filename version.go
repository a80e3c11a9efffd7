package toolhost

import (
	"runtime/debug"
	"sync"
)

// Version returns this build's version: the module version it was built at,
// or for a build from a checkout the commit (12 digits, "+dirty" with local
// changes), or "devel" when the build says neither.
func Version() string { return version() }

// version reads the build information once.
var version = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			rev = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	if rev == "" {
		return "devel"
	}
	return rev + dirty
})
