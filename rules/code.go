package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// CodeBounds bound one script of code mode's run_script (a config's or a
// role's code block): each field zero means "not said here", so that a
// role's block overrides the config's only where it says something
// ([CodeBounds.Over]), and [DefaultCodeBounds] fills in the rest.
type CodeBounds struct {
	// Steps is the most Starlark execution steps a script may run.
	Steps int64
	// Timeout is the longest a script may run, its inner calls (and their
	// approvals) included; at most [MaxCodeTimeout].
	Timeout time.Duration
	// Memory is the most memory, in bytes, the script's runner process
	// may take beyond what its runtime holds at its start: the kernel
	// refuses it more (plugins/codemode).
	Memory int64
	// Calls is the most tool calls a script may make.
	Calls int
	// Output is the most bytes the script may return: its result and what
	// it printed, as the JSON the model gets.
	Output int
	// Parallel is the most of a script's parallel() calls that run at
	// once; at most [MaxCodeParallel].
	Parallel int
}

// The largest of each bound. Every one is a whole number a JSON reader
// holding numbers as doubles (a browser) reads exactly, and the byte
// bounds leave room to add to them.
const (
	MaxCodeSteps    = 1_000_000_000_000
	MaxCodeTimeout  = time.Hour
	MaxCodeBytes    = 1 << 40 // memory and output
	MaxCodeCalls    = 1_000_000
	MaxCodeParallel = 64
)

// DefaultCodeBounds returns the bounds of a script whose role and config
// say none.
func DefaultCodeBounds() CodeBounds {
	return CodeBounds{Steps: 1_000_000, Timeout: time.Minute, Memory: 256 << 20, Calls: 50, Output: 32 << 10, Parallel: 4}
}

// Over returns b with the fields it leaves zero taken from under.
func (b CodeBounds) Over(under CodeBounds) CodeBounds {
	pick := func(x, y int64) int64 {
		if x > 0 {
			return x
		}
		return y
	}
	return CodeBounds{
		Steps:    pick(b.Steps, under.Steps),
		Timeout:  time.Duration(pick(int64(b.Timeout), int64(under.Timeout))),
		Memory:   pick(b.Memory, under.Memory),
		Calls:    int(pick(int64(b.Calls), int64(under.Calls))),
		Output:   int(pick(int64(b.Output), int64(under.Output))),
		Parallel: int(pick(int64(b.Parallel), int64(under.Parallel))),
	}
}

// Check says which bound is out of range, or nil: each is from 0 (the
// default) to its maximum (MaxCode...).
func (b CodeBounds) Check() error {
	for _, c := range []struct {
		name     string
		v, limit int64
	}{
		{"steps", b.Steps, MaxCodeSteps}, {"memory", b.Memory, MaxCodeBytes}, {"calls", int64(b.Calls), MaxCodeCalls},
		{"output", int64(b.Output), MaxCodeBytes}, {"parallel", int64(b.Parallel), MaxCodeParallel},
	} {
		if c.v < 0 || c.v > c.limit {
			return fmt.Errorf("%s: %d is not from 0 (the default) to %d", c.name, c.v, c.limit)
		}
	}
	if b.Timeout < 0 || b.Timeout > MaxCodeTimeout {
		return fmt.Errorf("timeout: %v is not from 0 (the default) to %v", b.Timeout, MaxCodeTimeout)
	}
	return nil
}

type codeJSON struct {
	Steps    int64  `json:"steps,omitempty"`
	Timeout  string `json:"timeout,omitempty"`
	Memory   int64  `json:"memory,omitempty"`
	Calls    int    `json:"calls,omitempty"`
	Output   int    `json:"output,omitempty"`
	Parallel int    `json:"parallel,omitempty"`
}

// MarshalJSON writes the bounds a block says as {"steps", "timeout",
// "memory", "calls", "output", "parallel"}, timeout as a duration such as
// "30s", memory and output in bytes; those it leaves zero are left out.
func (b CodeBounds) MarshalJSON() ([]byte, error) {
	j := codeJSON{Steps: b.Steps, Memory: b.Memory, Calls: b.Calls, Output: b.Output, Parallel: b.Parallel}
	if b.Timeout > 0 {
		j.Timeout = b.Timeout.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what [CodeBounds.MarshalJSON] writes, and nothing
// else: another key, or one of those spelled otherwise, is an error; a
// value of the wrong JSON type is one naming its bound ("steps: a JSON
// number 1.5 is not a whole number").
func (b *CodeBounds) UnmarshalJSON(data []byte) error {
	var j codeJSON
	if err := strictJSON(data, &j); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			want := "a whole number"
			if te.Field == "timeout" {
				want = `a duration such as "30s"`
			}
			return fmt.Errorf("%s: a JSON %s is not %s", te.Field, te.Value, want)
		}
		return fmt.Errorf("code: %w", err)
	}
	*b = CodeBounds{Steps: j.Steps, Memory: j.Memory, Calls: j.Calls, Output: j.Output, Parallel: j.Parallel}
	if j.Timeout != "" {
		d, err := time.ParseDuration(j.Timeout)
		if err != nil {
			return fmt.Errorf("timeout: %q is not a duration such as \"30s\" or \"1m\"", j.Timeout)
		}
		b.Timeout = d
	}
	return nil
}
