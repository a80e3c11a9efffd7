package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/proctest"
)

func TestApprovals(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t, t.TempDir())
		now := time.Now()
		mk := func(id string, requested time.Time, ttl time.Duration) Approval {
			t.Helper()
			a := Approval{ID: id, CallID: "call_" + id, Tool: "write", Group: "workspace", AgentID: "agent-1", Role: "developer",
				Arguments: []byte(`{"path":"a","token":"[REDACTED]"}`), RunID: "run_1", Requested: requested, Deadline: requested.Add(ttl)}
			if err := s.CreateApproval(ctx, a); err != nil {
				t.Fatal(err)
			}
			return a
		}
		mk("appr_b", now.Add(-time.Second), time.Minute)
		mk("appr_a", now.Add(-2*time.Second), time.Minute)
		mk("appr_gone", now.Add(-time.Hour), time.Minute) // its waiter died: past its deadline
		if err := s.CreateApproval(ctx, Approval{ID: "appr_a", Deadline: now.Add(time.Minute)}); !errors.Is(err, ErrExists) {
			t.Fatalf("the same id again: %v", err)
		}
		if err := s.CreateApproval(ctx, Approval{ID: "appr_x"}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("no deadline: %v", err)
		}

		pending, err := s.PendingApprovals(ctx)
		if err != nil || len(pending) != 2 || pending[0].ID != "appr_a" || pending[1].ID != "appr_b" {
			t.Fatalf("pending = %+v, %v", pending, err)
		}
		p := pending[0]
		if p.CallID != "call_appr_a" || p.Tool != "write" || p.Group != "workspace" || p.AgentID != "agent-1" || p.Role != "developer" || p.RunID != "run_1" ||
			string(p.Arguments) != `{"path":"a","token":"[REDACTED]"}` || p.Status != ApprovalPending || !p.Decided.IsZero() ||
			!p.Requested.Equal(now.Add(-2*time.Second)) || !p.Deadline.Equal(now.Add(-2*time.Second+time.Minute)) {
			t.Fatalf("pending[0] = %+v", p)
		}

		// One decision: a second, on any status, fails with ErrNotPending.
		d, err := s.DecideApproval(ctx, "appr_a", ApprovalDecision{Status: ApprovalModified, Reason: "narrower", Arguments: []byte(`{"path":"b"}`)})
		if err != nil || d.Status != ApprovalModified || d.Reason != "narrower" || string(d.Modified) != `{"path":"b"}` || d.Decided.IsZero() {
			t.Fatalf("decided = %+v, %v", d, err)
		}
		if _, err := s.DecideApproval(ctx, "appr_a", ApprovalDecision{Status: ApprovalApproved}); !errors.Is(err, ErrNotPending) || !strings.Contains(err.Error(), "modified already") {
			t.Fatalf("deciding twice: %v", err)
		}
		if _, err := s.DecideApproval(ctx, "appr_gone", ApprovalDecision{Status: ApprovalApproved}); !errors.Is(err, ErrNotPending) || !strings.Contains(err.Error(), "past its deadline") {
			t.Fatalf("deciding past the deadline: %v", err)
		}
		if _, err := s.DecideApproval(ctx, "appr_nope", ApprovalDecision{Status: ApprovalApproved}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deciding an unknown id: %v", err)
		}
		for _, bad := range []ApprovalDecision{{Status: "maybe"}, {Status: ApprovalExpired}, {Status: ApprovalModified}} {
			if _, err := s.DecideApproval(ctx, "appr_b", bad); !errors.Is(err, ErrInvalid) {
				t.Fatalf("decision %+v: %v", bad, err)
			}
		}
		if got, err := s.Approval(ctx, "appr_a"); err != nil || got.Status != ApprovalModified || string(got.Modified) != `{"path":"b"}` {
			t.Fatalf("Approval = %+v, %v", got, err)
		}
		if _, err := s.Approval(ctx, "appr_nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Approval of an unknown id: %v", err)
		}

		// The waiter gives up: on a pending one, its status; after a
		// decision, the decision.
		if e, err := s.EndApproval(ctx, "appr_a", ApprovalExpired); err != nil || e.Status != ApprovalModified {
			t.Fatalf("ending a decided one = %+v, %v", e, err)
		}
		if e, err := s.EndApproval(ctx, "appr_b", ApprovalCancelled); err != nil || e.Status != ApprovalCancelled || e.Decided.IsZero() {
			t.Fatalf("ending a pending one = %+v, %v", e, err)
		}
		if _, err := s.DecideApproval(ctx, "appr_b", ApprovalDecision{Status: ApprovalDenied}); !errors.Is(err, ErrNotPending) || !strings.Contains(err.Error(), "cancelled already") {
			t.Fatalf("deciding a cancelled one: %v", err)
		}
		if _, err := s.EndApproval(ctx, "appr_b", ApprovalPending); !errors.Is(err, ErrInvalid) {
			t.Fatalf("ending as pending: %v", err)
		}
		if _, err := s.EndApproval(ctx, "appr_nope", ApprovalExpired); !errors.Is(err, ErrNotFound) {
			t.Fatalf("ending an unknown id: %v", err)
		}
		if pending, err := s.PendingApprovals(ctx); err != nil || len(pending) != 0 {
			t.Fatalf("pending after = %+v, %v", pending, err)
		}

		// A week past its deadline an approval is forgotten, at the next
		// creation.
		mk("appr_old", now.Add(-approvalKeep-time.Hour), time.Minute)
		mk("appr_new", now, time.Minute)
		if _, err := s.Approval(ctx, "appr_old"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("an old approval: %v", err)
		}
		if _, err := s.Approval(ctx, "appr_gone"); err != nil {
			t.Fatalf("a recent one: %v", err)
		}
	})
}

// TestApprovalsAcrossStores: an approval created through one store is
// listed and decided through another on the same database, and the first
// store's watch of changes wakes for the decision.
func TestApprovalsAcrossStores(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		dir := t.TempDir()
		a, b := open(t, dir), open(t, dir)
		w, err := a.Changes(ctx, 5*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := a.CreateApproval(ctx, Approval{ID: "appr_1", Tool: "t", Group: "g", Arguments: []byte(`{}`), Deadline: time.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		pending, err := b.PendingApprovals(ctx)
		if err != nil || len(pending) != 1 || pending[0].ID != "appr_1" {
			t.Fatalf("pending on b = %+v, %v", pending, err)
		}
		drain(w.C)
		if _, err := b.DecideApproval(ctx, "appr_1", ApprovalDecision{Status: ApprovalDenied, Reason: "no"}); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(proctest.Patience)
		for {
			select {
			case <-w.C:
			case <-deadline:
				t.Fatal("no change seen by a after b's decision")
			}
			if got, err := a.Approval(ctx, "appr_1"); err == nil && got.Status == ApprovalDenied && got.Reason == "no" {
				break
			}
		}
	})
}

// drain empties c of a pending signal.
func drain(c <-chan struct{}) {
	select {
	case <-c:
	default:
	}
}
