package mcpsource

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
)

// Progress of a call reaches its caller in the order the server sent it,
// all of it before the call's result. The SDK answers a call as soon as
// it reads the response, while it hands notifications to a queue of their
// own, so a notification sent just before the response could be handled
// after the call returned, and be lost. The connection to a stdio server
// therefore takes each notifications/progress as it reads it (era.go's
// heard) and queues it for its call, in order; the call, once answered,
// waits for its queue to be delivered. Over HTTP the SDK's connection
// cannot be wrapped (it learns of the session through a method of its
// own), and the SDK's handler queues a report: one sent just before the
// answer may come too late.

// progressQueue bounds the reports of one call waiting to be delivered; a
// server sending faster than the caller takes them loses the excess (the
// host thins them anyway).
const progressQueue = 64

// progressReport is one notifications/progress.
type progressReport struct {
	progress, total float64
	message         string
}

// progressSink delivers the reports of one call, in order, on a goroutine
// of its own.
type progressSink struct {
	reports chan progressReport
	done    chan struct{}
}

// progressSinks are the sinks of the calls in flight, by progress token.
type progressSinks struct {
	mu    sync.Mutex
	sinks map[string]*progressSink
}

// open starts the sink of a call's token, delivering to p.
func (ps *progressSinks) open(token string, p toolhost.Progress) {
	sink := &progressSink{reports: make(chan progressReport, progressQueue), done: make(chan struct{})}
	go func() {
		defer close(sink.done)
		for r := range sink.reports {
			p(r.progress, r.total, r.message)
		}
	}()
	ps.mu.Lock()
	if ps.sinks == nil {
		ps.sinks = map[string]*progressSink{}
	}
	ps.sinks[token] = sink
	ps.mu.Unlock()
}

// close ends the sink of the token once what it holds is delivered: every
// report read before the call's response.
func (ps *progressSinks) close(token string) {
	ps.mu.Lock()
	sink := ps.sinks[token]
	delete(ps.sinks, token)
	ps.mu.Unlock()
	if sink != nil {
		close(sink.reports)
		<-sink.done
	}
}

// read queues a notifications/progress for its call, if one is in flight.
func (ps *progressSinks) read(params json.RawMessage) {
	var p mcp.ProgressNotificationParams
	if json.Unmarshal(params, &p) == nil {
		ps.take(&p)
	}
}

// take queues a progress report for its call, if one is in flight.
func (ps *progressSinks) take(p *mcp.ProgressNotificationParams) {
	if p.ProgressToken == nil {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if sink := ps.sinks[fmt.Sprint(p.ProgressToken)]; sink != nil {
		select {
		case sink.reports <- progressReport{p.Progress, p.Total, p.Message}:
		default:
		}
	}
}
