// Package rpcplugin binds the ToolGroup service to hashicorp/go-plugin: the
// handshake both sides share, [Serve] for the plugin side and [Launch] for the
// host side, which starts a plugin as a subprocess in its own process group.
package rpcplugin

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/proto"
	"go.opentelemetry.io/otel"
	"google.golang.org/grpc"
)

// Handshake returns the go-plugin handshake: a plugin started by anything
// but a toolhost host refuses to run.
func Handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  1,
		MagicCookieKey:   "TOOLHOST_PLUGIN",
		MagicCookieValue: "d3c1b5b0-tool-group-v1",
	}
}

// pluginName is the one plugin every toolhost plugin binary serves.
const pluginName = "toolgroup"

// MaxMessageBytes bounds one call's arguments or result on the wire.
const MaxMessageBytes = 64 << 20

// versionedPlugins lists what each major protocol version serves.
func versionedPlugins(impl toolhost.Provider) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{1: {pluginName: &grpcPlugin{impl: impl}}}
}

// grpcPlugin is the go-plugin glue on both sides.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl toolhost.Provider
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	proto.RegisterToolGroupServer(s, proto.NewServer(p.impl))
	return nil
}

// GRPCClient receives go-plugin's done context, cancelled when the plugin
// process has exited; the conn carries it to the host.
func (p *grpcPlugin) GRPCClient(done context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &dispensed{client: proto.NewClient(conn), conn: conn, done: done}, nil
}

type dispensed struct {
	client *proto.Client
	conn   *grpc.ClientConn
	done   context.Context
}

// Serve serves impl as a plugin until the host closes the connection. The
// process's global tracer provider becomes the plugin's ([proto.TracerProvider]),
// so that spans a handler or a library it uses starts from the call's
// context join the host's trace.
func Serve(impl toolhost.Provider, logger hclog.Logger) {
	otel.SetTracerProvider(proto.TracerProvider())
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake(),
		VersionedPlugins: versionedPlugins(impl),
		Logger:           logger,
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(MaxMessageBytes))...)
		},
	})
}
