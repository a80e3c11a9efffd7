package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/toolhost/toolhost/internal/pgtest"
)

// runtimeAgent creates a runtime agent of the root role, with no owner
// unless given.
func runtimeAgent(t testing.TB, s *Store, owner string, lease time.Time) Agent {
	t.Helper()
	a, err := s.CreateAgent(context.Background(), Agent{RoleID: RootRoleID, Kind: AgentRuntime, Status: StatusWaiting, Owner: owner, LeaseUntil: lease})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func claim(t testing.TB, s *Store, id, owner, stale string, ttl time.Duration) bool {
	t.Helper()
	ok, err := s.ClaimAgent(context.Background(), id, owner, stale, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func agentOf(t testing.TB, s *Store, id string) Agent {
	t.Helper()
	a, err := s.Agent(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAgentLeases: two stores on one database, as two hosts: a claim holds
// an agent against the other until its lease passes; renewing keeps it and
// tells the owner which agents it lost; releasing frees them at once.
func TestAgentLeases(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		a, b := open(t, dir), open(t, dir)
		ctx := context.Background()
		const hour = time.Hour

		// Unowned: the first claim wins and holds; the owner may claim again.
		x := runtimeAgent(t, a, "", time.Time{})
		before := time.Now()
		if !claim(t, a, x.ID, "A", "", hour) || claim(t, b, x.ID, "B", "", hour) || !claim(t, a, x.ID, "A", "", hour) {
			t.Fatal("claims of an unowned agent: want A, not B, A again")
		}
		got := agentOf(t, b, x.ID)
		if got.Owner != "A" || got.LeaseUntil.Before(before.Add(hour)) || got.LeaseUntil.After(time.Now().Add(hour)) {
			t.Fatalf("after A's claim: owner %q, lease until %v", got.Owner, got.LeaseUntil)
		}

		// A lease that has passed lets another take the agent; the old
		// owner's renewal then no longer holds it.
		y := runtimeAgent(t, a, "", time.Time{})
		if !claim(t, a, y.ID, "A", "", -time.Second) || !claim(t, b, y.ID, "B", "", hour) {
			t.Fatal("B could not take an agent whose lease had passed")
		}
		if claim(t, a, y.ID, "A", "", hour) {
			t.Fatal("A took back an agent B holds")
		}
		renewedFrom := time.Now()
		held, err := a.RenewLeases(ctx, "A", hour, []string{x.ID, y.ID})
		if err != nil || !slices.Equal(held, []string{x.ID}) {
			t.Fatalf("A renewed %v, %v; want only %s", held, err, x.ID)
		}
		if got := agentOf(t, a, x.ID); got.LeaseUntil.Before(renewedFrom.Add(hour)) {
			t.Fatalf("renewed lease until %v, want after %v", got.LeaseUntil, renewedFrom.Add(hour))
		}
		if got := agentOf(t, a, y.ID); got.Owner != "B" {
			t.Fatalf("A's renewal changed B's agent: owner %q", got.Owner)
		}
		if held, err := b.RenewLeases(ctx, "B", hour, nil); err != nil || len(held) != 0 {
			t.Fatalf("renewing nothing: %v, %v", held, err)
		}

		// A real lease, short: B's claim succeeds once it has passed, and
		// never before.
		z := runtimeAgent(t, a, "", time.Time{})
		if !claim(t, a, z.ID, "A", "", 200*time.Millisecond) {
			t.Fatal("A could not claim an unowned agent")
		}
		lease := agentOf(t, b, z.ID).LeaseUntil
		for deadline := time.Now().Add(30 * time.Second); !claim(t, b, z.ID, "B", "", hour); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("B never took the agent whose lease passed at %v", lease)
			}
		}
		if now := time.Now(); now.Before(lease) {
			t.Fatalf("B took the agent at %v, before its lease passed at %v", now, lease)
		}

		// A stale owner (dead, known by the caller) without a lease, as
		// before leases: taken only by naming it.
		old := runtimeAgent(t, a, "123:dead", time.Time{})
		if claim(t, b, old.ID, "B", "", hour) || !claim(t, b, old.ID, "B", "123:dead", hour) {
			t.Fatal("a stale owner's agent: want taken only when named stale")
		}

		// Final agents are not claimed.
		fin := runtimeAgent(t, a, "", time.Time{})
		if _, err := a.TerminateAgent(ctx, fin.ID, "done"); err != nil {
			t.Fatal(err)
		}
		if claim(t, b, fin.ID, "B", "", hour) {
			t.Fatal("B claimed a terminated agent")
		}

		// Releasing frees every agent of the owner at once, not others'.
		n, err := b.ReleaseAgents(ctx, "B")
		if err != nil || n != 3 {
			t.Fatalf("B released %d, %v; want 3 (y, z, old)", n, err)
		}
		for _, id := range []string{y.ID, z.ID, old.ID} {
			if got := agentOf(t, a, id); got.Owner != "" || !got.LeaseUntil.IsZero() {
				t.Fatalf("%s after release: owner %q, lease %v", id, got.Owner, got.LeaseUntil)
			}
		}
		if got := agentOf(t, a, x.ID); got.Owner != "A" {
			t.Fatalf("B's release freed A's agent: owner %q", got.Owner)
		}
		if !claim(t, a, y.ID, "A", "", hour) {
			t.Fatal("A could not take a released agent")
		}

		// Releasing one agent: only the owner's, only that one.
		if ok, err := b.ReleaseAgent(ctx, x.ID, "B"); err != nil || ok {
			t.Fatalf("B released A's agent: %v, %v", ok, err)
		}
		if ok, err := a.ReleaseAgent(ctx, x.ID, "A"); err != nil || !ok {
			t.Fatalf("A could not release its agent: %v, %v", ok, err)
		}
		if got := agentOf(t, b, x.ID); got.Owner != "" || !got.LeaseUntil.IsZero() {
			t.Fatalf("after release: owner %q, lease %v", got.Owner, got.LeaseUntil)
		}
		if got := agentOf(t, b, y.ID); got.Owner != "A" {
			t.Fatalf("releasing one agent released another: owner %q", got.Owner)
		}
	})
}

// TestAgentCreatedWithALease: an agent created with an owner and a lease
// keeps both, and round-trips through Agents.
func TestAgentCreatedWithALease(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		until := time.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
		a := runtimeAgent(t, s, "A", until)
		all, err := s.Agents(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(all, func(x Agent) bool { return x.ID == a.ID })
		if i < 0 || all[i].Owner != "A" || !all[i].LeaseUntil.Equal(until) {
			t.Fatalf("stored %+v, want owner A until %v", all, until)
		}
		if claim(t, s, a.ID, "B", "", time.Hour) {
			t.Fatal("B took an agent created with a lease")
		}
	})
}

// TestConcurrentClaimsHaveOneWinner: many hosts claiming one agent at once
// (unowned, or with a lease that has passed) leave exactly one owner, the
// one claim that succeeded.
func TestConcurrentClaimsHaveOneWinner(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		stores := []*Store{open(t, dir), open(t, dir), open(t, dir), open(t, dir)}
		const claimers = 16
		for round := range 10 {
			a := runtimeAgent(t, stores[0], "", time.Time{})
			if round%2 == 1 { // a dead host's agent: its lease has passed
				claim(t, stores[0], a.ID, "dead", "", -time.Second)
			}
			var wg sync.WaitGroup
			won := make([]bool, claimers)
			errs := make([]error, claimers)
			start := make(chan struct{})
			for i := range claimers {
				wg.Go(func() {
					<-start
					won[i], errs[i] = stores[i%len(stores)].ClaimAgent(context.Background(), a.ID, fmt.Sprint("host", i), "", time.Hour)
				})
			}
			close(start)
			wg.Wait()
			winner := -1
			for i := range claimers {
				if errs[i] != nil {
					t.Fatalf("round %d: claim %d: %v", round, i, errs[i])
				}
				if won[i] {
					if winner >= 0 {
						t.Fatalf("round %d: host%d and host%d both claimed the agent", round, winner, i)
					}
					winner = i
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: nobody claimed the agent", round)
			}
			if got := agentOf(t, stores[1], a.ID); got.Owner != fmt.Sprint("host", winner) {
				t.Fatalf("round %d: owner %q, winner host%d", round, got.Owner, winner)
			}
		}
	})
}

// TestLeaseProperty: any sequence of claims, renewals, releases and
// terminations by a few owners agrees with a model in which an agent has
// at most one owner, whose claim holds until its lease passes or it
// releases it, and a final agent is never claimed. Leases are either long
// (an hour) or already passed, so the model needs no clock.
func TestLeaseProperty(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		stores := []*Store{open(t, dir), open(t, dir)}
		ctx := context.Background()
		owners := []string{"A", "B", "C"}
		type state struct {
			owner   string
			expired bool
			final   bool
		}
		rapid.Check(t, func(rt *rapid.T) {
			const n = 3
			ids := make([]string, n)
			model := make([]state, n)
			for i := range ids {
				ids[i] = runtimeAgent(t, stores[0], "", time.Time{}).ID
			}
			ttlOf := func(expired bool) time.Duration {
				if expired {
					return -time.Second
				}
				return time.Hour
			}
			for range rapid.IntRange(1, 30).Draw(rt, "steps") {
				s := stores[rapid.IntRange(0, len(stores)-1).Draw(rt, "store")]
				who := rapid.SampledFrom(owners).Draw(rt, "owner")
				i := rapid.IntRange(0, n-1).Draw(rt, "agent")
				switch op := rapid.IntRange(0, 3).Draw(rt, "op"); op {
				case 0: // claim
					expired := rapid.Bool().Draw(rt, "expired")
					m := model[i]
					want := !m.final && (m.owner == "" || m.owner == who || m.expired)
					got, err := s.ClaimAgent(ctx, ids[i], who, "", ttlOf(expired))
					if err != nil {
						rt.Fatal(err)
					}
					if got != want {
						rt.Fatalf("claim of %d by %s: %v, model %v (%+v)", i, who, got, want, m)
					}
					if got {
						model[i] = state{owner: who, expired: expired}
					}
				case 1: // renew every agent
					expired := rapid.Bool().Draw(rt, "expired")
					held, err := s.RenewLeases(ctx, who, ttlOf(expired), ids)
					if err != nil {
						rt.Fatal(err)
					}
					var want []string
					for j := range model {
						if model[j].owner == who {
							want = append(want, ids[j])
							model[j].expired = expired
						}
					}
					slices.Sort(held)
					slices.Sort(want)
					if !slices.Equal(held, want) {
						rt.Fatalf("%s renewed %v, model %v", who, held, want)
					}
				case 2: // release
					got, err := s.ReleaseAgents(ctx, who)
					if err != nil {
						rt.Fatal(err)
					}
					want := 0
					for j := range model {
						if model[j].owner == who {
							want++
							model[j].owner, model[j].expired = "", false
						}
					}
					// Agents of earlier checks may be who's too: at least
					// this check's are released.
					if got < want {
						rt.Fatalf("%s released %d, model %d", who, got, want)
					}
				case 3: // terminate
					if _, err := s.TerminateAgent(ctx, ids[i], "test"); err == nil {
						model[i].final = true
					}
				}
				for j := range ids {
					got := agentOf(t, s, ids[j])
					if got.Owner != model[j].owner || got.Final() != model[j].final {
						rt.Fatalf("agent %d: owner %q final %v, model %+v", j, got.Owner, got.Final(), model[j])
					}
				}
			}
			// This check's agents leave no owners behind for the next.
			for _, who := range owners {
				if _, err := stores[0].ReleaseAgents(ctx, who); err != nil {
					rt.Fatal(err)
				}
			}
		})
	})
}

// TestClaimIsSeenByOtherStores: taking an agent is a change other hosts
// hear of (so the one that lost it stops at once), through Changes.
func TestClaimIsSeenByOtherStores(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		a, b := open(t, dir), open(t, dir)
		x := runtimeAgent(t, a, "", time.Time{})
		w, err := b.Changes(context.Background(), 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if !claim(t, a, x.ID, "A", "", time.Hour) {
			t.Fatal("claim failed")
		}
		select {
		case <-w.C:
		case <-time.After(30 * time.Second):
			t.Fatal("the other store never heard of the claim")
		}
	})
}

// TestRenewalsDoNotNotify: on PostgreSQL, renewing leases (every few
// seconds on every host) wakes no other host, nor does a claim that takes
// nothing; a claim that takes an agent does. Notifications arrive in
// commit order, so a sentinel sent after each statement shows whether the
// statement sent one first.
func TestRenewalsDoNotNotify(t *testing.T) {
	dsn := pgtest.Start(t)
	s := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: dsn})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "LISTEN "+changesChannel); err != nil {
		t.Fatal(err)
	}
	// next returns the payload of the first notification after f, then
	// waits for the sentinel.
	sentinel := 0
	next := func(f func()) string {
		t.Helper()
		f()
		sentinel++
		mark := fmt.Sprint("sentinel", sentinel)
		if _, err := s.sqlDB.ExecContext(ctx, `SELECT pg_notify($1, $2)`, changesChannel, mark); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		first := ""
		for {
			n, err := conn.WaitForNotification(wctx)
			if err != nil {
				t.Fatal(err)
			}
			if first == "" {
				first = n.Payload
			}
			if n.Payload == mark {
				return first
			}
		}
	}
	var x Agent
	if got := next(func() { x = runtimeAgent(t, s, "", time.Time{}) }); got != "agents" {
		t.Fatalf("creating an agent notified %q first", got)
	}
	if got := next(func() { claim(t, s, x.ID, "A", "", time.Hour) }); got != "agents" {
		t.Fatalf("a claim notified %q first", got)
	}
	if got := next(func() {
		if held, err := s.RenewLeases(ctx, "A", time.Hour, []string{x.ID}); err != nil || len(held) != 1 {
			t.Fatalf("renew: %v, %v", held, err)
		}
	}); got != fmt.Sprint("sentinel", sentinel) {
		t.Fatalf("a renewal notified %q", got)
	}
	if got := next(func() { claim(t, s, x.ID, "B", "", time.Hour) }); got != fmt.Sprint("sentinel", sentinel) {
		t.Fatalf("a claim that took nothing notified %q", got)
	}
}

// TestSavesKeepTheConversationWithItsAgent: SaveAgent stores messages, the
// agent's state and its mail together, keeping the messages of an agent
// ended meanwhile (ErrFinal) but sending none of its mail; TakeUnread appends what it makes of the taken mail
// to the conversation, each message once, numbered after the last.
func TestSavesKeepTheConversationWithItsAgent(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		a := runtimeAgent(t, s, "", time.Time{})
		parent := runtimeAgent(t, s, "", time.Time{})
		reports := func() int {
			t.Helper()
			mail, err := s.Mailbox(ctx, parent.ID)
			if err != nil {
				t.Fatal(err)
			}
			return len(mail)
		}
		conversation := func() string {
			t.Helper()
			msgs, err := s.Messages(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, m := range msgs {
				out = append(out, fmt.Sprintf("%d %s %s", m.Seq, m.Role, m.Content))
			}
			return fmt.Sprint(out)
		}
		a.Status, a.Answer, a.Turns = StatusWaiting, "four", 1
		report := Mail{To: parent.ID, From: a.ID, Body: "four"}
		if _, err := s.SaveAgent(ctx, a, []AgentMessage{{Role: "user", Content: "2+2?"}, {Role: "assistant", Content: "four"}}, report); err != nil {
			t.Fatal(err)
		}
		if n := reports(); n != 1 {
			t.Fatalf("the parent has %d reports, want 1", n)
		}
		if got, err := s.Agent(ctx, a.ID); err != nil || got.Answer != "four" || got.Turns != 1 {
			t.Fatalf("agent %+v, %v: want the answer four after 1 turn", got, err)
		}
		for _, body := range []string{"one", "two"} {
			if _, err := s.Send(ctx, Mail{To: a.ID, Body: body}); err != nil {
				t.Fatal(err)
			}
		}
		into := func(m Mail) AgentMessage { return AgentMessage{Role: "user", Content: "mail: " + m.Body} }
		for want := 2; want >= 0; want -= 2 { // the second take finds nothing
			if mail, err := s.TakeUnread(ctx, a.ID, into); err != nil || len(mail) != want {
				t.Fatalf("took %v, %v: want %d messages", mail, err, want)
			}
		}
		const taken = "[1 user 2+2? 2 assistant four 3 user mail: one 4 user mail: two]"
		if got := conversation(); got != taken {
			t.Fatalf("conversation %s, want %s", got, taken)
		}
		if _, err := s.TerminateAgent(ctx, a.ID, "stop"); err != nil {
			t.Fatal(err)
		}
		a.Answer = "late"
		got, err := s.SaveAgent(ctx, a, []AgentMessage{{Role: "assistant", Content: "late"}}, report)
		if !errors.Is(err, ErrFinal) || got.Status != StatusTerminated || got.Answer != "four" {
			t.Fatalf("saving a terminated agent: %+v, %v; want it as stored, with ErrFinal", got, err)
		}
		if got := conversation(); got != strings.TrimSuffix(taken, "]")+" 5 assistant late]" {
			t.Fatalf("conversation %s: the last message was not kept", got)
		}
		if n := reports(); n != 1 {
			t.Fatalf("the parent has %d reports, want 1: a terminated agent reported", n)
		}
	})
}

// TestTerminationKeepsTheLastSave: an agent saving its counts while another
// host terminates it keeps the last counts it saved: the termination
// changes its status and error only, and no save lands after it.
func TestTerminationKeepsTheLastSave(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		for round := range 30 {
			a := runtimeAgent(t, s, "", time.Time{})
			type save struct {
				last int
				err  error
			}
			saved := make(chan save, 1)
			go func() {
				last := 0
				for turns := 1; ; turns++ {
					a.Status, a.Turns = StatusRunning, turns
					if _, err := s.SaveAgent(ctx, a, nil); err != nil {
						saved <- save{last, err}
						return
					}
					last = turns
				}
			}()
			time.Sleep(time.Duration(round%5) * time.Millisecond)
			if _, err := s.TerminateAgent(ctx, a.ID, "stop"); err != nil {
				// the saver stops when the store closes, reporting to no one
				t.Fatalf("round %d: terminate while the agent saves: %v", round, err)
			}
			sv := <-saved
			if !errors.Is(sv.err, ErrFinal) {
				t.Fatalf("round %d: the saves ended on %v, want ErrFinal", round, sv.err)
			}
			last := sv.last
			got, err := s.Agent(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != StatusTerminated || got.Error != "stop" || got.Turns != last {
				t.Fatalf("round %d: stored %s (%q) with %d turns, want terminated (stop) with the last save's %d", round, got.Status, got.Error, got.Turns, last)
			}
		}
	})
}
