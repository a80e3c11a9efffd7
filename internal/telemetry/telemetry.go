// Package telemetry builds the host's OpenTelemetry tracer provider from the
// config's telemetry block and the standard OTEL_* environment variables.
// Tracing is off unless one of them asks for an exporter.
package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Settings are the telemetry block with the environment's values filled in
// where the block is silent.
type Settings struct {
	Exporter    string // "otlp", "console" or "" (off)
	Endpoint    string // the OTLP collector's base URL; "" is the exporter's default
	Protocol    string // "http/protobuf" or "grpc"
	SampleRatio float64
	ServiceName string
}

// Resolve fills in the block's unset fields from the OTEL_* variables
// getenv returns. OTEL_SDK_DISABLED=true turns tracing off whatever the
// block says.
func Resolve(c config.Telemetry, getenv func(string) string) Settings {
	s := Settings{Exporter: c.Traces, Endpoint: c.Endpoint, Protocol: c.Protocol, SampleRatio: c.SampleRatio, ServiceName: c.ServiceName}
	if s.Exporter == "" {
		// OTEL_TRACES_EXPORTER may list several; the first is taken.
		s.Exporter = strings.TrimSpace(strings.Split(getenv("OTEL_TRACES_EXPORTER"), ",")[0])
	}
	if s.Exporter == "none" || strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		s.Exporter = ""
	}
	if s.Protocol == "" {
		s.Protocol = first(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")
	}
	if s.ServiceName == "" {
		s.ServiceName = first(getenv("OTEL_SERVICE_NAME"), "toolhost")
	}
	return s
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// NewProvider returns the tracer provider s asks for, batching spans to its
// exporter, or nil when tracing is off. The OTLP exporters read their other
// OTEL_EXPORTER_OTLP_* variables (headers, certificates, timeout,
// compression) themselves, and the provider OTEL_TRACES_SAMPLER and
// OTEL_BSP_* when s sets no ratio. Shut it down to flush what is queued.
func NewProvider(ctx context.Context, s Settings) (*sdktrace.TracerProvider, error) {
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch s.Exporter {
	case "":
		return nil, nil
	case "console":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
	case "otlp":
		exp, err = otlpExporter(ctx, s)
	default:
		return nil, fmt.Errorf("telemetry: unknown traces exporter %q: want otlp, console or none", s.Exporter)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s exporter: %w", s.Exporter, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.version", toolhost.Version())),
		resource.WithFromEnv(),
		resource.WithAttributes(attribute.String("service.name", s.ServiceName)),
		resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if s.SampleRatio > 0 {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(s.SampleRatio))))
	}
	return sdktrace.NewTracerProvider(opts...), nil
}

// otlpExporter is an OTLP exporter over s.Protocol. An endpoint is a base
// URL, as OTEL_EXPORTER_OTLP_ENDPOINT is: over HTTP, /v1/traces is added.
func otlpExporter(ctx context.Context, s Settings) (sdktrace.SpanExporter, error) {
	switch s.Protocol {
	case "grpc":
		var opts []otlptracegrpc.Option
		if s.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(s.Endpoint))
		}
		return otlptracegrpc.New(ctx, opts...)
	case "http/protobuf":
		var opts []otlptracehttp.Option
		if s.Endpoint != "" {
			u, err := url.Parse(s.Endpoint)
			if err != nil {
				return nil, err
			}
			u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
			opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
		}
		return otlptracehttp.New(ctx, opts...)
	}
	return nil, fmt.Errorf("unknown OTLP protocol %q: want http/protobuf or grpc", s.Protocol)
}
