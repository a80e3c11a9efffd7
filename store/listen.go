package store

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener follows PostgreSQL's notifications on changesChannel, on a
// connection of its own, and passes them to the store's watches; a change
// to tokens or roles also drops the token cache. While the database is
// unreachable it reconnects, and once back it wakes every watch, since it
// may have missed a change.
type listener struct {
	tokens *tokenCache
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	watches map[*ChangeWatch]watched
}

// watched is a watch's channel and the tables it follows (nil: all).
type watched struct {
	c      chan struct{}
	tables []string
}

// listen starts following dsn's notifications.
func listen(dsn string, tokens *tokenCache) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{tokens: tokens, cancel: cancel, done: make(chan struct{}), watches: map[*ChangeWatch]watched{}}
	go l.run(ctx, dsn)
	return l
}

// The waits between attempts to reconnect: from the first, doubling up to
// the last.
const (
	relistenFirst = 50 * time.Millisecond
	relistenMax   = 2 * time.Second
)

func (l *listener) run(ctx context.Context, dsn string) {
	defer close(l.done)
	wait := relistenFirst
	for ctx.Err() == nil {
		err := l.follow(ctx, dsn, func() { wait = relistenFirst })
		if ctx.Err() != nil {
			return
		}
		_ = err // the database is away: try again
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, relistenMax)
	}
}

// follow listens on one connection until it fails; connected is called
// once it listens.
func (l *listener) follow(ctx context.Context, dsn string, connected func()) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+changesChannel); err != nil {
		return err
	}
	connected()
	l.changed("") // whatever happened while not listening
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.changed(n.Payload)
	}
}

// changed passes a change of table (any, when "") on to the watches that
// follow it.
func (l *listener) changed(table string) {
	if table == "" || table == "tokens" || table == "roles" {
		l.tokens.invalidateLocal()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.watches {
		if table == "" || w.tables == nil || slices.Contains(w.tables, table) {
			notify(w.c)
		}
	}
}

// watch returns a new watch of the notifications of tables (none: all).
func (l *listener) watch(tables []string) *ChangeWatch {
	c := make(chan struct{}, 1)
	w := &ChangeWatch{C: c}
	w.stop = func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.watches, w)
	}
	l.mu.Lock()
	l.watches[w] = watched{c: c, tables: slices.Clone(tables)}
	l.mu.Unlock()
	return w
}

// close stops listening.
func (l *listener) close() {
	l.cancel()
	<-l.done
}
