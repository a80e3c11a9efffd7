package agents_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/store"
)

// TestArtifactsBelongToRoles: an artifact is read by the role that stored
// it and by the roles it handed it to (put_artifact's share,
// spawn_agent_with_task's artifacts), and by no other: another role's
// read, of its id or of the bytes' SHA-256, is refused as an id that names
// nothing is. The same bytes in two roles are two artifacts; a role hands
// on only what it stored; a role's quota evicts its own artifacts alone,
// and its eviction is told only to the roles that could read it.
func TestArtifactsBelongToRoles(t *testing.T) {
	e := start(t, `{"roles": {"reviewer": [{"final_answer": "read"}]}}`, "", "", "", quotas(1<<20, 40))
	e.createRole("author", "artifact", "org_management")
	e.createRole("reviewer", "artifact", "org_management")
	e.createRole("other", "artifact")
	agent := map[string]string{}
	for _, r := range []string{"author", "reviewer", "other"} {
		a, err := e.h.Agents().Create(context.Background(), r, store.Agent{})
		if err != nil {
			t.Fatal(err)
		}
		agent[r] = a.ID
	}
	put := func(role string, args map[string]any) string {
		t.Helper()
		res, err := e.call(agent[role], "put_artifact", args)
		if err != nil || !res.OK {
			t.Fatalf("%s's put_artifact %v: %+v, %v", role, args, res, err)
		}
		return res.Meta[toolhost.MetaStructuredContent].(map[string]any)["id"].(string)
	}
	// get reads id as role: its text, or its error's code and message with
	// the id taken out.
	get := func(role, id string) (text string, code toolhost.Code) {
		t.Helper()
		res, err := e.call(agent[role], "get_artifact", map[string]string{"id": id})
		if err != nil {
			t.Fatal(err)
		}
		if res.OK {
			return res.Stdout, ""
		}
		return strings.ReplaceAll(res.Error.Message, id, "ID"), res.Error.Code
	}
	const secret = "the secret report"
	sum := sha256.Sum256([]byte(secret))
	hash := hex.EncodeToString(sum[:])
	mine, theirs := put("author", map[string]any{"content": secret}), put("reviewer", map[string]any{"content": secret})
	if mine == theirs || mine == hash || theirs == hash {
		t.Fatalf("ids %s and %s for the same bytes, whose SHA-256 is %s", mine, theirs, hash)
	}
	unknown, code := get("reviewer", strings.Repeat("0", 64))
	if code != toolhost.CodeValidation {
		t.Fatalf("an unknown id: %s %s", code, unknown)
	}
	for _, row := range []struct{ role, id string }{{"reviewer", mine}, {"other", mine}, {"other", theirs}, {"other", hash}, {"author", hash}, {"author", theirs}} {
		if msg, code := get(row.role, row.id); code != toolhost.CodeValidation || msg != unknown {
			t.Errorf("%s reads %s: %s %q, want the unknown id's %q", row.role, row.id, code, msg, unknown)
		}
	}
	for _, row := range []struct{ role, id string }{{"author", mine}, {"reviewer", theirs}} {
		if text, code := get(row.role, row.id); text != secret {
			t.Errorf("%s reads its own %s: %s %q", row.role, row.id, code, text)
		}
	}

	// share names who else reads it, and nothing else.
	shared := put("author", map[string]any{"content": "for other", "share": []string{"other"}})
	if text, _ := get("other", shared); text != "for other" {
		t.Errorf("other reads what author shared with it: %q", text)
	}
	if _, code := get("reviewer", shared); code == "" {
		t.Error("reviewer reads what author shared with other")
	}
	if res, err := e.call(agent["author"], "put_artifact", map[string]any{"content": "x", "share": []string{"nobody"}}); err != nil || res.OK || res.Error.Code != toolhost.CodeValidation {
		t.Errorf("a share with an unknown role: %+v, %v", res, err)
	}

	// spawn_agent_with_task hands over the spawner's own artifacts, to the
	// spawned agent's role, and names them in its task.
	res, err := e.call(agent["author"], "spawn_agent_with_task", map[string]any{"roleId": "reviewer", "task": "review it", "artifacts": []string{mine}})
	if err != nil || !res.OK {
		t.Fatalf("spawn with an artifact: %+v, %v", res, err)
	}
	var spawned struct{ AgentID string }
	if err := json.Unmarshal([]byte(res.Stdout), &spawned); err != nil {
		t.Fatal(err)
	}
	if task := e.agent(spawned.AgentID).Task; !strings.HasPrefix(task, "review it") || !strings.Contains(task, mine) {
		t.Errorf("the spawned agent's task: %q", task)
	}
	if text, _ := get("reviewer", mine); text != secret {
		t.Errorf("reviewer reads what was handed to it: %q", text)
	}
	if _, code := get("other", mine); code == "" {
		t.Error("other reads what was handed to reviewer")
	}
	for _, row := range []struct {
		ids  []string
		code toolhost.Code
	}{
		{[]string{mine}, toolhost.CodePolicy},             // handed to reviewer, not reviewer's to hand on
		{[]string{shared}, toolhost.CodeValidation},       // author's, never handed to reviewer
		{[]string{"nope"}, toolhost.CodeValidation},       // no id
		{[]string{theirs, hash}, toolhost.CodeValidation}, // all or nothing
	} {
		res, err := e.call(agent["reviewer"], "spawn_agent_with_task", map[string]any{"roleId": "other", "task": "read it", "artifacts": row.ids})
		if err != nil || res.OK || res.Error.Code != row.code {
			t.Errorf("reviewer hands %v to other: %+v, %v; want %s", row.ids, res, err, row.code)
		}
	}
	if _, code := get("other", theirs); code == "" {
		t.Error("a refused hand-over shared an artifact")
	}

	// author fills its quota (40 bytes): its own oldest go, reviewer's copy
	// of the same bytes stays. The eviction of what author handed to
	// reviewer is told to reviewer, and to other as an unknown id.
	put("author", map[string]any{"content": strings.Repeat("f", 30)})
	if msg, _ := get("author", mine); !strings.Contains(msg, "was evicted") {
		t.Errorf("author reads its evicted artifact: %q", msg)
	}
	if msg, _ := get("reviewer", mine); !strings.Contains(msg, "was evicted") {
		t.Errorf("reviewer reads the evicted artifact handed to it: %q", msg)
	}
	if msg, _ := get("other", mine); msg != unknown {
		t.Errorf("other reads author's evicted artifact: %q, want %q", msg, unknown)
	}
	if text, _ := get("reviewer", theirs); text != secret {
		t.Errorf("reviewer's copy after author's evictions: %q", text)
	}
}

// TestArtifactsOfADeletedRole: a role made under the name of a deleted one
// reads none of the deleted role's artifacts.
func TestArtifactsOfADeletedRole(t *testing.T) {
	e := start(t, `{"roles": {}}`, "", "", "")
	ctx := context.Background()
	agentOf := func() string {
		t.Helper()
		e.createRole("temp", "artifact")
		a, err := e.h.Agents().Create(ctx, "temp", store.Agent{})
		if err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	res, err := e.call(agentOf(), "put_artifact", map[string]any{"content": "the old role's"})
	if err != nil || !res.OK {
		t.Fatalf("put_artifact: %+v, %v", res, err)
	}
	id := res.Meta[toolhost.MetaStructuredContent].(map[string]any)["id"].(string)
	if err := e.h.Roles().Delete(ctx, "temp"); err != nil {
		t.Fatal(err)
	}
	if res, err := e.call(agentOf(), "get_artifact", map[string]string{"id": id}); err != nil || res.OK || res.Error.Code != toolhost.CodeValidation {
		t.Fatalf("the new role reads the old one's artifact: %+v, %v", res, err)
	}
}
