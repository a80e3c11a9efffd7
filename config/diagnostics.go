package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Diagnostics is the error [Parse] returns: every problem found, not just the first.
type Diagnostics []Diagnostic

// Diagnostic is one problem, at a position in the file or in an environment variable.
type Diagnostic struct {
	// File is the filename as passed to [Parse], or the name of the environment variable at fault.
	File string
	// Line and Column are 1-based; both are 0 when the problem has no position in File.
	Line, Column int
	// Summary says briefly what is wrong.
	Summary string
	// Detail explains it and may be empty.
	Detail string
}

// format renders d as `file:line,col: summary: detail`, leaving out ":line,col" when Line is 0
// and ": detail" when Detail is empty.
func format(d Diagnostic) string {
	var b strings.Builder
	b.WriteString(d.File)
	if d.Line > 0 {
		fmt.Fprintf(&b, ":%d,%d", d.Line, d.Column)
	}
	b.WriteString(": ")
	b.WriteString(d.Summary)
	if d.Detail != "" {
		b.WriteString(": ")
		b.WriteString(d.Detail)
	}
	return b.String()
}

// Error formats each diagnostic on its own line as `file:line,col: summary: detail`, leaving out
// ":line,col" when Line is 0 (a problem in an environment variable) and ": detail" when Detail is empty.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = format(d)
	}
	return strings.Join(lines, "\n")
}

// fromHCL converts HCL's error diagnostics about filename, sorted by position.
func fromHCL(hds hcl.Diagnostics, filename string) Diagnostics {
	var ds Diagnostics
	for _, hd := range hds {
		if hd.Severity != hcl.DiagError {
			continue
		}
		d := Diagnostic{File: filename, Summary: hd.Summary, Detail: hd.Detail}
		if hd.Subject != nil {
			d.File, d.Line, d.Column = hd.Subject.Filename, hd.Subject.Start.Line, hd.Subject.Start.Column
		}
		ds = append(ds, d)
	}
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	return ds
}

// position formats the start of rng as "file:line,col".
func position(rng hcl.Range) string {
	return fmt.Sprintf("%s:%d,%d", rng.Filename, rng.Start.Line, rng.Start.Column)
}
