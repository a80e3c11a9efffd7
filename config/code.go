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
	attr(d, content.Attributes, "steps", &b.Steps, upTo[int64](rules.MaxCodeSteps))
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
	attr(d, content.Attributes, "calls", &b.Calls, upTo(rules.MaxCodeCalls))
	attr(d, content.Attributes, "parallel", &b.Parallel, upTo(rules.MaxCodeParallel))
	return b
}

// upTo returns a reader of a whole number from 1 to limit.
func upTo[T int | int64](limit T) func(T) (T, error) {
	return func(n T) (T, error) {
		if n < 1 || n > limit {
			return 0, fmt.Errorf("%d is not from 1 to %d", n, limit)
		}
		return n, nil
	}
}

// codeBytes reads a code block's byte size: at least 1 byte, at most
// rules.MaxCodeBytes (1 TiB).
func codeBytes(s string) (int64, error) {
	n, err := byteSize(s, "")
	switch {
	case err != nil:
		return 0, err
	case n < 1 || n > rules.MaxCodeBytes:
		return 0, fmt.Errorf("%q is not from 1 byte to 1TiB", s)
	}
	return n, nil
}
