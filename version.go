package toolhost

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// BuildInfo is what this build of toolhost says of itself: `toolhost
// version` prints it, and MCP clients get its Version as serverInfo.version.
type BuildInfo struct {
	// Version is the build's version: the module version it was built at
	// (a tagged release, or the pseudo-version go build gives a
	// checkout's commit, with "+dirty" for local changes); for a build
	// that has only its commit, the same pseudo-version made from
	// Revision and Time; "devel" when the build says neither.
	Version string `json:"version"`
	// Module is the main module's path.
	Module string `json:"module,omitempty"`
	// Revision is the commit the build was made from.
	Revision string `json:"revision,omitempty"`
	// Time is the commit's time.
	Time time.Time `json:"time,omitzero"`
	// Modified says the checkout had local changes.
	Modified bool `json:"modified"`
	// GoVersion is the Go toolchain that built it.
	GoVersion string `json:"go_version"`
}

// The commit scripts/build stamps with -ldflags -X, for the builds whose
// toolchain does not record it (a git worktree, whose .git is a file, or
// -buildvcs=false): its full hash, its time (RFC 3339) and "true" when the
// checkout had local changes. What the toolchain recorded wins.
var (
	stampRevision string
	stampTime     string
	stampModified string
)

// Build returns this build's [BuildInfo].
func Build() BuildInfo { return build() }

// Version returns this build's version, [BuildInfo.Version].
func Version() string { return build().Version }

// build reads the build information once.
var build = sync.OnceValue(func() BuildInfo {
	b := BuildInfo{Revision: stampRevision, Modified: stampModified == "true", GoVersion: runtime.Version()}
	b.Time, _ = time.Parse(time.RFC3339, stampTime)
	if info, ok := debug.ReadBuildInfo(); ok {
		b.Module = info.Main.Path
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time, _ = time.Parse(time.RFC3339, s.Value)
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
		if v := info.Main.Version; v != "" && v != "(devel)" {
			b.Version = v
		}
	}
	b.Time = b.Time.UTC()
	if b.Version == "" {
		b.Version = pseudoVersion(b)
	}
	return b
})

// pseudoVersion is the version go build gives a checkout's commit without
// a tag, v0.0.0-TIME-REVISION, with "+dirty" for local changes; "devel"
// without a commit.
func pseudoVersion(b BuildInfo) string {
	if len(b.Revision) < 12 {
		return "devel"
	}
	v := b.Revision[:12]
	if !b.Time.IsZero() {
		v = fmt.Sprintf("v0.0.0-%s-%s", b.Time.Format("20060102150405"), v)
	}
	if b.Modified {
		v += "+dirty"
	}
	return v
}
