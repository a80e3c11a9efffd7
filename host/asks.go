package host

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/redact"
	"github.com/toolhost/toolhost/store"
)

// maxLogMessage bounds a log message a module sends the calling client, in
// bytes of its params' JSON: a longer one goes on as a line saying so.
const maxLogMessage = 16 << 10

// callAsker is the caller's [toolhost.Asker] as one call passes it to its
// module: each request the module makes of the client is a
// tool_call.input event under the call (its method, its key, the answer's
// outcome — never what the client answered), and each log message is redacted, bounded and
// dropped once the call has ended.
type callAsker struct {
	toolhost.Asker
	c     *call
	ended *atomic.Bool
}

// asker wraps the caller's Asker for the call c.
func (c *call) asker(a toolhost.Asker, ended *atomic.Bool) toolhost.Asker {
	return callAsker{Asker: a, c: c, ended: ended}
}

func (a callAsker) Ask(ctx context.Context, round map[string]toolhost.ClientRequest) (map[string]json.RawMessage, error) {
	answers, err := a.Asker.Ask(ctx, round)
	for key, req := range round {
		payload := map[string]any{"method": req.Method, "key": key}
		switch {
		case err != nil:
			payload["outcome"], payload["code"], payload["error"] = "refused", toolhost.CodeOf(err), redactError(err).Error()
		default:
			payload["outcome"] = outcome(req.Method, answers[key])
		}
		e := a.c.event(store.EventCallInput, payload)
		e.ParentID = a.c.req.Context.CallID // it belongs under the call
		a.c.h.events.Emit(e)
	}
	return answers, err
}

// outcome says how the client answered a request, without what it
// answered: an elicitation's action, a sampling's stop reason.
func outcome(method string, answer json.RawMessage) string {
	var r struct {
		Action     string `json:"action"`
		StopReason string `json:"stopReason"`
	}
	_ = json.Unmarshal(answer, &r)
	switch {
	case answer == nil:
		return "unanswered"
	case method == toolhost.MethodElicitation && r.Action != "":
		return r.Action
	case method == toolhost.MethodSampling && r.StopReason != "":
		return "answered: " + r.StopReason
	}
	return "answered"
}

func (a callAsker) Log(params json.RawMessage) {
	if a.ended.Load() {
		return
	}
	params, _ = redact.JSON(params)
	if len(params) > maxLogMessage {
		var p struct {
			Level  string `json:"level"`
			Logger string `json:"logger,omitempty"`
		}
		_ = json.Unmarshal(params, &p)
		p.Level = cmp.Or(p.Level, "info")
		params, _ = json.Marshal(map[string]any{"level": p.Level, "logger": p.Logger,
			"data": fmt.Sprintf("(a log message of %d bytes, more than %d, was left out)", len(params), maxLogMessage)})
	}
	a.Asker.Log(params)
}
