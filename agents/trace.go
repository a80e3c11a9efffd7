package agents

import (
	"context"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents/model"
	"github.com/toolhost/toolhost/redact"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// With the host tracing (Host.TracerProvider), each turn of an agent is the
// root of a trace, "agent turn", holding the model request ("chat") and the
// turn's tool calls; a summary the compress tool asks for is a "chat" span
// under that call. With no provider, rt.tracer is nil and nothing starts.

const tracerName = "github.com/toolhost/toolhost/agents"

// startTurn starts the span of the agent's turn number turn.
func (rt *Runtime) startTurn(ctx context.Context, a *agent, turn int) (context.Context, trace.Span) {
	return rt.tracer.Start(ctx, "agent turn", trace.WithNewRoot(), trace.WithAttributes(
		attribute.String("gen_ai.agent.name", a.role), attribute.String("toolhost.agent_id", a.id),
		attribute.String("toolhost.role", a.role), attribute.Int("toolhost.turn", turn)))
}

// endSpan ends a span, failed with err's code and redacted message when err
// is set.
func endSpan(span trace.Span, err error) {
	if err != nil {
		msg, _ := redact.String(err.Error())
		span.SetStatus(codes.Error, msg)
		span.SetAttributes(attribute.String("toolhost.code", string(toolhost.CodeOf(err))))
	}
	span.End()
}

// complete asks the model provider, under a "chat" span when traced, with
// the tokens it used.
func (rt *Runtime) complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	if rt.tracer == nil {
		return rt.opts.Provider.Complete(ctx, req)
	}
	ctx, span := rt.tracer.Start(ctx, "chat", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"), attribute.String("toolhost.purpose", req.Purpose),
		attribute.String("toolhost.agent_id", req.Agent.ID), attribute.Int("toolhost.tools", len(req.Tools)),
		attribute.Int("toolhost.messages", len(req.Messages))))
	resp, err := rt.opts.Provider.Complete(ctx, req)
	if resp != nil {
		span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", resp.Usage.PromptTokens),
			attribute.Int("gen_ai.usage.output_tokens", resp.Usage.CompletionTokens))
	}
	endSpan(span, err)
	return resp, err
}
