package agents_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
)

// BenchmarkAgent measures what the runtime adds around a model, per message
// an idle agent receives: answered directly (one turn: the conversation and
// status stored, events written), or after one console_print call (two
// turns and a call through the pipeline); against the baseline of that call
// made directly through Host.Call, in the same run. The scripted model
// costs microseconds.
func BenchmarkAgent(b *testing.B) {
	b.Run("host-call", func(b *testing.B) {
		e := start(b, `{"roles": {}}`, "", "", "")
		req := &toolhost.CallRequest{Tool: "console_print", Arguments: []byte(`{"text": "x"}`)}
		b.ResetTimer()
		for range b.N {
			if res, err := e.h.Call(context.Background(), req); err != nil || !res.OK {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("message-answer", func(b *testing.B) {
		benchMessages(b, `{"final_answer": "ok", "repeat": -1}`)
	})
	b.Run("message-tool-answer", func(b *testing.B) {
		turns := strings.Repeat(`{"tool_calls": [{"name": "console_print", "arguments": {"text": "x"}}]}, {"final_answer": "ok"}, `, b.N)
		benchMessages(b, strings.TrimSuffix(turns, ", "))
	})
}

// benchMessages sends b.N messages, one at a time, to an agent whose model
// plays turns, waiting each time until it is idle again.
func benchMessages(b *testing.B, turns string) {
	e := start(b, `{"roles": {"bench": [`+turns+`]}}`, "", "", "")
	e.createRole("bench", "console")
	a, err := e.rt.Spawn(context.Background(), agents.SpawnRequest{Role: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	e.wait(a.ID)
	b.ResetTimer()
	for range b.N {
		if _, err := e.rt.Send(context.Background(), "", a.ID, "go"); err != nil {
			b.Fatal(err)
		}
		e.wait(a.ID)
	}
	b.StopTimer()
	if got := e.agent(a.ID); got.Status != "waiting" || got.Answer != "ok" {
		b.Fatalf("agent: %+v", got)
	}
}
