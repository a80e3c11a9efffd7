package rules

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// Chain is the conditions of the rules that apply to one tool, in order,
// compiled into one program that gives the first that holds
// ("c0 ? 0 : c1 ? 1 : … : -1"): a call makes one evaluation, not one per
// rule, which spares CEL's cost per evaluation (its activation, its cost
// tracker). CEL's conditional fails when its condition does, so the
// program fails exactly when evaluating the conditions one by one would
// fail before one holds; then, or when its cost passes the bound of one
// condition, the conditions are evaluated one by one, which says which
// failed and why.
//
// [Chain.First] evaluates the conditions directly (see direct) first, and CEL
// decides only a call on which one of them, before one holds, is not sure
// or has no direct evaluation.
type Chain struct {
	conds   []*Condition
	prg     cel.Program // nil: fewer than two conditions, or not compiled
	directs []direct    // the conditions' direct evaluations (nil: none)
}

// chains memoises the chains' programs by their text, within the bound
// of compiled's memo.
var chains sync.Map

// NewChain chains the conditions (nil: one that always holds).
func NewChain(conds []*Condition) *Chain {
	ch := &Chain{conds: conds, directs: make([]direct, len(conds))}
	for i, c := range conds {
		ch.directs[i] = holds
		if c != nil {
			ch.directs[i] = c.direct
		}
	}
	if len(conds) < 2 || conds[0].Always() {
		return ch
	}
	var b strings.Builder
	for i, c := range conds {
		expr := "true"
		if c != nil {
			expr = c.expr
		}
		fmt.Fprintf(&b, "(%s) ? %d : ", expr, i)
	}
	b.WriteString("-1")
	text := b.String()
	if prg, ok := chains.Load(text); ok {
		ch.prg = prg.(cel.Program)
		return ch
	}
	ch.prg = compileChain(text)
	if ch.prg != nil && compiledCount.Load() < maxCompiled {
		if _, loaded := chains.LoadOrStore(text, ch.prg); !loaded {
			compiledCount.Add(1)
		}
	}
	return ch
}

// compileChain compiles a chain's text, or returns nil (the parser's
// bounds on size and nesting passed: its conditions are then evaluated one
// by one).
func compileChain(text string) cel.Program {
	e, err := celEnv()
	if err != nil {
		return nil
	}
	if e, err = e.Extend(cel.ParserExpressionSizeLimit(len(text) + 1)); err != nil {
		return nil
	}
	checked, iss := e.Compile(text)
	if iss.Err() != nil {
		return nil
	}
	prg, err := program(e, checked)
	if err != nil {
		return nil
	}
	return prg
}

// First returns the index of the first condition that holds on v, or -1
// when none does; or the index of the first that could not be evaluated
// before one held, and its error (see [Condition.Match]).
func (ch *Chain) First(ctx context.Context, v *Vars) (int, error) {
	if len(ch.conds) > 0 && ch.conds[0].Always() {
		return 0, nil
	}
	if i, ok := ch.directFirst(v); ok {
		return i, nil
	}
	if ch.prg != nil {
		if out, _, err := ch.prg.Eval(v); err == nil {
			if i, ok := out.(types.Int); ok {
				return int(i), nil
			}
		}
	}
	for i, c := range ch.conds {
		if ok, err := c.Match(ctx, v); ok || err != nil {
			return i, err
		}
	}
	return -1, nil
}

// directFirst is First by the direct evaluations: the first condition
// that holds, or -1, and true; or false when one of them, before one
// holds, is not sure or has none.
func (ch *Chain) directFirst(v *Vars) (int, bool) {
	for i, d := range ch.directs {
		if d == nil {
			return 0, false
		}
		b, ok := boolOf(d(v))
		if !ok {
			return 0, false
		}
		if b {
			return i, true
		}
	}
	return -1, true
}

// holds is the direct evaluation of no condition: it holds.
func holds(*Vars) (any, bool) { return true, true }
