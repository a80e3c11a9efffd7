package config

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/toolhost/toolhost/rules"
)

// CodeBounds are the bounds of code mode's scripts (run_script): a
// top-level `code {}` block says them for every role, a role's `code {}`
// block for its own scripts, attribute by attribute over the top-level
// one; what neither says is [rules.DefaultCodeBounds]'s.
type CodeBounds = rules.CodeBounds

var codeSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "steps"}, {Name: "timeout"}, {Name: "memory"}, {Name: "calls"}, {Name: "output"}, {Name: "parallel"}},
}

// code decodes a code block.
func (d *decoder) code(body hcl.Body) CodeBounds {
	var b CodeBounds
	content, diags := body.Content(codeSchema)
	d.add(diags)
	attr(d, content.Attributes, "steps", &b.Steps, func(n int64) (int64, error) {
		if n <= 0 {
			return 0, fmt.Errorf("%d must be greater than 0", n)
		}
		return n, nil
	})
	attr(d, content.Attributes, "timeout", &b.Timeout, func(s string) (time.Duration, error) {
		t, err := duration(s)
		if err == nil && t > rules.MaxCodeTimeout {
			err = fmt.Errorf("%q is longer than %v, the most a script may run", s, rules.MaxCodeTimeout)
		}
		return t, err
	})
	attr(d, content.Attributes, "memory", &b.Memory, codeBytes)
	attr(d, content.Attributes, "output", &b.Output, func(s string) (int, error) {
		n, err := codeBytes(s)
		return int(n), err
	})
	attr(d, content.Attributes, "calls", &b.Calls, positive)
	attr(d, content.Attributes, "parallel", &b.Parallel, func(n int) (int, error) {
		if n <= 0 || n > rules.MaxCodeParallel {
			return 0, fmt.Errorf("%d is not from 1 to %d", n, rules.MaxCodeParallel)
		}
		return n, nil
	})
	return b
}

// codeBytes reads a code block's byte size: at least 1 byte, at most 1 TiB.
func codeBytes(s string) (int64, error) {
	n, err := byteSize(s, "")
	switch {
	case err != nil:
		return 0, err
	case n < 1 || n > 1<<40:
		return 0, fmt.Errorf("%q is not from 1 byte to 1TiB", s)
	}
	return n, nil
}
