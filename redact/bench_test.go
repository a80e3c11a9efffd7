package redact

import (
	"strings"
	"testing"
)

// commandOutput is a slice of what tools return: a build and test log,
// directory listings, structured logs, kubectl and git output, Go source.
const commandOutput = `$ go test -v ./store/...
=== RUN   TestRolesRoundTrip
=== PAUSE TestRolesRoundTrip
=== RUN   TestEventsAppend/batch_of_100
--- PASS: TestEventsAppend/batch_of_100 (0.01s)
--- PASS: TestRolesRoundTrip (0.00s)
PASS
ok  	github.com/toolhost/toolhost/store	0.412s
$ ls -la /var/lib/toolhost
total 1432
drwxr-x---  5 toolhost toolhost    4096 Mar 14 09:12 .
drwxr-xr-x 42 root     root        4096 Mar  2 17:40 ..
-rw-r-----  1 toolhost toolhost 1294336 Mar 14 09:12 toolhost.db
-rw-r-----  1 toolhost toolhost   32768 Mar 14 09:12 toolhost.db-shm
-rw-r-----  1 toolhost toolhost  123632 Mar 14 09:12 toolhost.db-wal
drwxr-x---  2 toolhost toolhost    4096 Mar 10 11:03 artifacts
$ journalctl -u toolhost --since today -o cat | tail
{"@level":"info","@message":"plugin started","@module":"host","@timestamp":"2025-03-14T09:12:01.402311Z","path":"/usr/lib/toolhost/plugins/workspace","pid":48213}
{"@level":"debug","@message":"call finished","@module":"host.executor","call_id":"c-8f14e45f","tool":"grep","latency_ms":12.4,"exit_code":0}
time=2025-03-14T09:12:03.118Z level=INFO msg="role updated" role=reviewer groups=workspace,command agent=a-17 duration=1.2ms
time=2025-03-14T09:12:04.771Z level=WARN msg="slow tool call" tool=bash latency=2.31s limit=30s call_id=c-1679091c
$ kubectl get pods -n toolhost
NAME                        READY   STATUS    RESTARTS   AGE
toolhost-7d9c8b6f5d-2xkqz   1/1     Running   0          3d2h
toolhost-7d9c8b6f5d-9wlmp   1/1     Running   1 (2d ago) 3d2h
chromium-6b8d4c9f7-hz4tn    1/1     Running   0          3d2h
$ git log --oneline -5
a7e8a99 Tests and CLI share one host start-up helper each; RoleTools carries the count of all tools
cd61e7a host: deleting a role forgets its agents; store tests under -race
0fdd388 groups prints diagnostics; default config declares two roles; README: roles, policy, HTTP API
$ sed -n 40,60p host/executor.go
func (e *Executor) Call(ctx context.Context, agent string, call Call) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout(call.Tool))
	defer cancel()
	g, ok := e.groups.Lookup(call.Tool)
	if !ok {
		return nil, fmt.Errorf("executor: %w: %s", ErrUnknownTool, call.Tool)
	}
	sha := sha256.Sum256(call.Arguments) // e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
	return g.Call(ctx, call.ID, call.Tool, call.Arguments)
}
`

// prose is text such as a README or a model's answer.
const prose = `Roles choose tool groups; an agent bound to a role sees, in its model context, and may call
only the tools of its role's groups. The host loads the modules named in its configuration, registers
their groups (refusing reserved ids), routes tool calls to them, and removes a group the moment its
process exits or is unloaded. A failing tool is a result, not an error; a broken host is an error.
`

// fiftyKiB repeats text to 50 KiB.
func fiftyKiB(text string) string {
	var b strings.Builder
	for b.Len() < 50<<10 {
		b.WriteString(text)
	}
	return b.String()[:50<<10]
}

func BenchmarkString(b *testing.B) {
	clean := fiftyKiB(commandOutput)
	// A few secrets, spread over the text: one in each of the first copies.
	secrets := strings.NewReplacer(
		"agent=a-17", "agent=a-17 token=abcd1234efgh5678",
		"call_id=c-1679091c", "call_id=c-1679091c Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0b29saG9zdCJ9.c2lnbmF0dXJlc2lnbmF0dXJl",
		"PASS\n", "PASS\nGITHUB_TOKEN=ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789\nOPENAI_API_KEY=sk-proj-Zq3fT9uVb2WcXe7YhRj5KmNp\n",
	).Replace(commandOutput) + clean[:len(clean)-len(commandOutput)]
	if out, _ := String(secrets); strings.Count(out, mask) != 4 {
		b.Fatalf("the text with secrets has %d, not 4", strings.Count(out, mask))
	}
	for _, bc := range []struct{ name, in string }{{"clean", clean}, {"secrets", secrets}, {"prose", fiftyKiB(prose)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.in)))
			b.ReportAllocs()
			for b.Loop() {
				String(bc.in)
			}
		})
	}
}
