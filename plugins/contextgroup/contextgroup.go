// Package contextgroup is the context group: get_context_status and
// compress_context report how full the calling agent's context is and
// shrink it. It runs in-process, registered by the agent runtime
// ([github.com/toolhost/toolhost/agents]) under its reserved id; the
// runtime holds the conversations and serves the group as a [Service].
package contextgroup

import (
	"context"
	"fmt"

	"github.com/toolhost/toolhost/sdk"
)

// Service is what the context group needs from the agent runtime: the
// conversations of the agents it runs.
type Service interface {
	// Status reports the conversation of the agent, which the runtime must
	// run.
	Status(agentID string) (Status, error)
	// Compress has the model summarise the agent's older messages, keeping
	// its task and the keep most recent verbatim (0: the runtime's
	// default).
	Compress(ctx context.Context, agentID string, keep int) (Compression, error)
}

// Status is what get_context_status reports.
type Status struct {
	// Messages counts the messages of the conversation.
	Messages int `json:"messages"`
	// Tokens estimates the context's size: the system prompt, the tools and
	// the messages, counted with o200k_base.
	Tokens int `json:"tokens"`
	// Budget is the runtime block's context_budget, in tokens.
	Budget int `json:"budget"`
	// Percent is Tokens as a percentage of Budget, to a tenth.
	Percent float64 `json:"percent"`
	// Turns and TotalTokens are the agent's model calls and the tokens they
	// used over its life.
	Turns       int `json:"turns"`
	TotalTokens int `json:"totalTokens"`
}

// Compression is what [Service.Compress] did.
type Compression struct {
	// Summarised counts the messages the summary replaced: 0 when there
	// were too few to compress, and nothing changed.
	Summarised int
	// Removed counts the messages the conversation lost.
	Removed int
	// Messages is the conversation's length afterwards.
	Messages int
	// Kept is how many recent messages were to be kept verbatim.
	Kept int
	// Summary is the model's summary.
	Summary string
}

type compressArgs struct {
	Keep int `json:"keep,omitempty" jsonschema:"how many recent messages to keep verbatim; default from the runtime block (keep_recent)"`
}

// Group returns the context group, working on the calling agent's
// conversation through svc.
func Group(svc Service) *sdk.Group {
	return &sdk.Group{ID: "context", Description: "Your context window: how full it is, and compressing older turns into a summary.", Tools: []sdk.Tool{
		sdk.NewStructuredTool("get_context_status", "How many messages and tokens your context holds, against its budget.",
			func(_ context.Context, r *sdk.Request[struct{}]) (Status, error) {
				return svc.Status(r.Call.AgentID)
			}, sdk.Title("Get context status"), sdk.NeedsAgent(), sdk.NeedsConversation(), sdk.ReadOnly()),
		sdk.NewTool("compress_context", "Summarise your older messages through the model, keeping your task and the most recent messages verbatim.",
			func(ctx context.Context, r *sdk.Request[compressArgs]) (*sdk.Result, error) {
				c, err := svc.Compress(ctx, r.Call.AgentID, r.Args.Keep)
				if err != nil {
					return nil, err
				}
				if c.Summarised == 0 {
					return sdk.Text(fmt.Sprintf("nothing to compress: %d messages, the last %d are kept", c.Messages, c.Kept)), nil
				}
				return sdk.JSON(map[string]any{"summarised": c.Summarised, "removed": c.Removed, "messages": c.Messages, "summary": c.Summary})
			}, sdk.Title("Compress context"), sdk.NeedsAgent(), sdk.NeedsConversation(), sdk.Destructive()),
	}}
}
