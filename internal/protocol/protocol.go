// Package protocol is the one home of the plugin protocol between the host
// and a tool-group module: the go-plugin handshake and versions, the
// ToolGroup gRPC service (generated in package pb) with the conversion
// between its messages and the toolhost types, the [Client] the host calls
// and the server a plugin runs ([Serve], [Register]), a call's trace across
// the wire, the launch of a plugin process ([Launch]), and the limits on
// what a provider reports ([ValidateGroup]).
//
// It is internal: module authors reach it through package sdk, embedders
// through package host; what crosses it is the toolhost types.
package protocol

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/toolhost/toolhost"
	"go.opentelemetry.io/otel"
	"google.golang.org/grpc"
)

// The protocol's versions: go-plugin negotiates the major version at the
// handshake (VersionedPlugins), and every request carries the minor.
const (
	// protocolMajor changes with a breaking change to the protocol.
	protocolMajor = 1
	// protocolMinor grows when fields are added. Minor 1 added
	// [toolhost.ConfigureRequest.HostPaths], minor 2
	// [toolhost.ConfigureRequest.Sandbox], minor 3 [toolhost.ToolSpec.Title],
	// Annotations and OutputSchema, minor 4 the CallStream RPC, which carries
	// a call's progress, minor 5 trace context (the host's span in the
	// request, the plugin's spans in the response), minor 6 a call's output
	// streamed on CallStream ([toolhost.Output]).
	protocolMinor = 6
)

// The go-plugin magic cookie: a plugin started by anything but a toolhost
// host, which sets MagicCookieKey to MagicCookieValue in its environment,
// refuses to run.
const (
	MagicCookieKey   = "TOOLHOST_PLUGIN"
	MagicCookieValue = "d3c1b5b0-tool-group-v1"
)

// handshake is the go-plugin handshake both sides share.
var handshake = plugin.HandshakeConfig{
	ProtocolVersion:  protocolMajor,
	MagicCookieKey:   MagicCookieKey,
	MagicCookieValue: MagicCookieValue,
}

// pluginName is the one plugin every toolhost plugin binary serves.
const pluginName = "toolgroup"

// MaxMessageBytes bounds one call's arguments or result on the wire.
const MaxMessageBytes = 64 << 20

// versionedPlugins lists what each major protocol version serves.
func versionedPlugins(impl toolhost.Provider) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{protocolMajor: {pluginName: &grpcPlugin{impl: impl}}}
}

// grpcPlugin is the go-plugin glue on both sides.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl toolhost.Provider
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	Register(s, p.impl)
	return nil
}

// GRPCClient receives go-plugin's done context, cancelled when the plugin
// process has exited; the conn carries it to the host.
func (p *grpcPlugin) GRPCClient(done context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &dispensed{client: NewClient(conn), conn: conn, done: done}, nil
}

type dispensed struct {
	client *Client
	conn   *grpc.ClientConn
	done   context.Context
}

// Serve serves impl as a plugin until the host closes the connection. The
// process's global tracer provider becomes the plugin's (tracerProvider),
// so that spans a handler or a library it uses starts from the call's
// context join the host's trace.
func Serve(impl toolhost.Provider, logger hclog.Logger) {
	otel.SetTracerProvider(tracerProvider())
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  handshake,
		VersionedPlugins: versionedPlugins(impl),
		Logger:           logger,
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(MaxMessageBytes))...)
		},
	})
}
