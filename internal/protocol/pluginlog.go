package protocol

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost/internal/output"
)

// escapingLogger is the logger go-plugin relays a plugin's stderr to: the
// plugin's hclog messages, their arguments and its other lines are the
// plugin's text, so each message, name and argument is escaped
// ([output.Escape]) before it reaches the host's log, where it could
// otherwise start a line of its own or carry a terminal's control
// sequences.
type escapingLogger struct{ hclog.Logger }

// Log, Trace, Debug, Info, Warn and Error log msg and args escaped; With,
// Named and ResetNamed return a logger that escapes too.
func (l escapingLogger) Log(level hclog.Level, msg string, args ...any) {
	l.Logger.Log(level, output.Escape(msg), escapeArgs(args)...)
}
func (l escapingLogger) Trace(msg string, args ...any) {
	l.Logger.Trace(output.Escape(msg), escapeArgs(args)...)
}
func (l escapingLogger) Debug(msg string, args ...any) {
	l.Logger.Debug(output.Escape(msg), escapeArgs(args)...)
}
func (l escapingLogger) Info(msg string, args ...any) {
	l.Logger.Info(output.Escape(msg), escapeArgs(args)...)
}
func (l escapingLogger) Warn(msg string, args ...any) {
	l.Logger.Warn(output.Escape(msg), escapeArgs(args)...)
}
func (l escapingLogger) Error(msg string, args ...any) {
	l.Logger.Error(output.Escape(msg), escapeArgs(args)...)
}
func (l escapingLogger) With(args ...any) hclog.Logger {
	return escapingLogger{l.Logger.With(escapeArgs(args)...)}
}
func (l escapingLogger) Named(name string) hclog.Logger {
	return escapingLogger{l.Logger.Named(output.Escape(name))}
}
func (l escapingLogger) ResetNamed(name string) hclog.Logger {
	return escapingLogger{l.Logger.ResetNamed(output.Escape(name))}
}

// escapeArgs escapes the keys and values of a log entry's arguments: a
// string as it is, another value (a plugin's JSON object or array) as it
// prints, when printing it shows what escaping changes.
func escapeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = output.Escape(v)
		case nil, bool, int, int64, float64:
			out[i] = v
		default:
			s := fmt.Sprint(v)
			if e := output.Escape(s); e != s {
				out[i] = e
			} else {
				out[i] = v
			}
		}
	}
	return out
}
