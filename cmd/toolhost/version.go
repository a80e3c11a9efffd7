package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/toolhost/toolhost"
)

// versionUsage is `toolhost version`.
var versionUsage = &usage{
	name:    "version",
	summary: "print this build's version, commit, its time and Go version",
	details: `The version is the one MCP clients get as serverInfo.version. scripts/build stamps the
commit where go build cannot (a git worktree); a build with neither says "devel".`,
	example: "toolhost version -json",
}

func versionCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags(versionUsage, stdout, stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	b := toolhost.Build()
	if *asJSON {
		printJSON(stdout, b)
		return 0
	}
	fmt.Fprintf(stdout, "toolhost %s\n", b.Version)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{{"module", b.Module}, {"revision", b.Revision}, {"time", timeText(b.Time)}, {"modified", fmt.Sprint(b.Modified)}, {"go", b.GoVersion}} {
		if kv[1] != "" {
			fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
		}
	}
	_ = tw.Flush()
	return 0
}

// timeText is t in RFC 3339, "" for the zero time.
func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339)
}
