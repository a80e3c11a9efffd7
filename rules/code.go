package rules

import "time"

// CodeBounds bound one script of code mode's run_script (a config's or a
// role's code block): each field zero means "not said here", so that a
// role's block overrides the config's only where it says something
// ([CodeBounds.Over]), and [DefaultCodeBounds] fills in the rest.
type CodeBounds struct {
	// Steps is the most Starlark execution steps a script may run.
	Steps int64 `json:"steps,omitempty"`
	// Timeout is the longest a script may run, its inner calls (and their
	// approvals) included.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Memory is the most the host's Go heap may grow, in bytes, while the
	// script runs (checked every few milliseconds).
	Memory int64 `json:"memory,omitempty"`
	// Calls is the most tool calls a script may make.
	Calls int `json:"calls,omitempty"`
	// Output is the most bytes the script may return: its result and what
	// it printed, as the JSON the model gets.
	Output int `json:"output,omitempty"`
	// Parallel is the most of a script's parallel() calls that run at once.
	Parallel int `json:"parallel,omitempty"`
}

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
