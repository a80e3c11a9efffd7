package host

import "sync"

// watchers are the functions to call when what roles see may have changed.
type watchers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func()
}

// Watch registers f to be called, in a goroutine of its own, whenever the
// tools a role sees may have changed: a group registered or unregistered (a
// plugin exited or came back), a role created, edited or deleted (here or by
// another process). It returns a function that unregisters f. MCP sessions
// use it to send notifications/tools/list_changed.
func (h *Host) Watch(f func()) (cancel func()) {
	w := &h.watchers
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[int]func(){}
	}
	id := w.next
	w.next++
	w.fns[id] = f
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.fns, id)
	}
}

// changed calls every watcher.
func (h *Host) changed() {
	w := &h.watchers
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.fns {
		go f()
	}
}
