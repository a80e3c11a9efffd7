package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The tasks of the code-mode measurement, each written (fixture, expected
// answer, the calls a competent model makes one turn at a time, and the
// script it writes instead) and committed before it was measured, and not
// changed to suit the figures since: the first three before anything was
// measured; issuesTask after the first measurement showed that one call
// of search_files does todoTask, which is therefore no multi-step task
// (codeResult.checks holds such a task to no goal). Each is done on the same host
// through the agent runtime call by call with the workspace and network
// tools, and with one run_script (bench/codemode.go). Every way reaches the
// same typed answer, formatted by the same function, which must equal the
// fixture's.

// codeTask is one task.
type codeTask struct {
	Name string
	// Prompt is the task as the agent is given it; base is the URL of the
	// pages' server.
	Prompt func(base string) string
	// Fixture writes the task's files into the workspace root ws (the
	// pages are served by codePages) and returns the expected answer.
	Fixture func(ws string) (string, error)
	// Next is the call-by-call model: given the results of every step so
	// far (the stdout of each step's calls, in order), the next step's
	// calls, or, when it has what it needs, the answer.
	Next func(base string, steps [][]string) ([]toolCall, string, error)
	// Script is the one script the model writes instead, for base.
	Script func(base string) string
	// Answer turns the script's result (run_script's "result") into the
	// answer.
	Answer func(result json.RawMessage) (string, error)
}

// toolCall is a call the model asks for: a tool and its arguments.
type toolCall struct {
	Name string
	Args map[string]any
}

// codeTasks are the tasks, in the report's order.
var codeTasks = []codeTask{todoTask, largestTask, titlesTask, issuesTask}

// todoTask: count the TODO comments across 20 files of Go and notes, and
// name the file holding the most. A competent model searches once.
var todoTask = codeTask{
	Name: "count TODOs across 20 files",
	Prompt: func(string) string {
		return "How many TODO comments are there in the 20 files under todo/, and which file holds the most? " +
			"Answer as: N TODOs; the most in FILE (M)."
	},
	Fixture: writeTodos,
	Next: func(_ string, steps [][]string) ([]toolCall, string, error) {
		if len(steps) == 0 {
			return []toolCall{{"search_files", map[string]any{"pattern": "TODO", "path": "todo", "literal": true}}}, "", nil
		}
		counts := map[string]int{}
		for line := range strings.Lines(steps[0][0]) {
			path, _, ok := strings.Cut(line, ":")
			if !ok {
				return nil, "", fmt.Errorf("search_files: a line without a path: %q", line)
			}
			counts[path]++
		}
		return nil, todoAnswer(counts), nil
	},
	Script: func(string) string {
		return `counts = {}
for line in search_files(pattern = "TODO", path = "todo", literal = True).splitlines():
    path = line.split(":")[0]
    counts[path] = counts.get(path, 0) + 1
result = counts
`
	},
	Answer: func(result json.RawMessage) (string, error) {
		var counts map[string]int
		if err := json.Unmarshal(result, &counts); err != nil {
			return "", fmt.Errorf("the script's result %s: %w", result, err)
		}
		return todoAnswer(counts), nil
	},
}

// todoAnswer formats the TODO counts by file.
func todoAnswer(counts map[string]int) string {
	total, top := 0, ""
	for _, p := range slices.Sorted(maps.Keys(counts)) {
		total += counts[p]
		if top == "" || counts[p] > counts[top] {
			top = p
		}
	}
	return fmt.Sprintf("%d TODOs; the most in %s (%d)", total, top, counts[top])
}

// writeTodos writes todo/: 14 Go files and 6 notes, 0 to 5 TODOs each
// (one a line, owner and text drawn at random), but scheduler.go with 7.
func writeTodos(ws string) (string, error) {
	rng := rand.New(rand.NewPCG(1, 20))
	owners := []string{"ana", "bo", "chen", "dara", "eli"}
	todos := []string{"handle the retry when the queue is full", "drop this once the old API is gone", "cache the parsed config",
		"check the error of Close", "make the timeout configurable", "log the request id", "split this function",
		"test the empty input", "use a context here", "remove the global"}
	goFiles := []string{"scheduler", "queue", "worker", "config", "server", "client", "cache", "store", "metrics", "auth",
		"router", "limits", "events", "backup"}
	notes := []string{"README.md", "CHANGES.md", "design.md", "notes.txt", "release.txt", "ops.md"}
	counts := map[string]int{}
	if err := os.MkdirAll(filepath.Join(ws, "todo"), 0o755); err != nil {
		return "", err
	}
	for i, stem := range goFiles {
		n := rng.IntN(6)
		if stem == "scheduler" {
			n = 7
		}
		var b strings.Builder
		fmt.Fprintf(&b, "// Package %s is part of the example service.\npackage %s\n\nimport (\n\t\"context\"\n\t\"errors\"\n\t\"time\"\n)\n", stem, stem)
		for f := range 4 + rng.IntN(4) {
			name := fmt.Sprintf("%s%d", strings.ToUpper(stem[:1])+stem[1:], f)
			fmt.Fprintf(&b, "\n// %s does the %s's step %d: it waits for ctx or the deadline.\nfunc %s(ctx context.Context, d time.Duration) error {\n", name, stem, f, name)
			if n > 0 && (f%2 == 0 || n > 2) {
				for range min(n, 1+rng.IntN(2)) {
					fmt.Fprintf(&b, "\t// TODO(%s): %s\n", owners[rng.IntN(len(owners))], todos[rng.IntN(len(todos))])
					n--
					counts[stem+".go"]++
				}
			}
			fmt.Fprintf(&b, "\tselect {\n\tcase <-ctx.Done():\n\t\treturn ctx.Err()\n\tcase <-time.After(d):\n\t}\n\tif d < %d*time.Millisecond {\n\t\treturn errors.New(\"%s: too short\")\n\t}\n\treturn nil\n}\n", 10+i, stem)
		}
		for ; n > 0; n-- {
			fmt.Fprintf(&b, "\n// TODO(%s): %s\n", owners[rng.IntN(len(owners))], todos[rng.IntN(len(todos))])
			counts[stem+".go"]++
		}
		if err := os.WriteFile(filepath.Join(ws, "todo", stem+".go"), []byte(b.String()), 0o644); err != nil {
			return "", err
		}
	}
	for _, name := range notes {
		n := rng.IntN(6)
		var b strings.Builder
		fmt.Fprintf(&b, "# %s\n\nWhat changed, what is planned and who looks after it.\n", strings.TrimSuffix(name, filepath.Ext(name)))
		for k := range 6 + rng.IntN(6) {
			fmt.Fprintf(&b, "\n- Item %d: the %s service was updated on day %d.\n", k+1, goFiles[rng.IntN(len(goFiles))], 1+rng.IntN(28))
			if n > 0 && rng.IntN(2) == 0 {
				fmt.Fprintf(&b, "- TODO: %s (%s)\n", todos[rng.IntN(len(todos))], owners[rng.IntN(len(owners))])
				n--
				counts[name]++
			}
		}
		if err := os.WriteFile(filepath.Join(ws, "todo", name), []byte(b.String()), 0o644); err != nil {
			return "", err
		}
	}
	return todoAnswer(counts), nil
}

// largestTask: find the largest of 50 log files and give its first lines.
// No tool tells a file's size: a competent model lists the directory and
// reads every file (in one turn), as the script does.
var largestTask = codeTask{
	Name: "largest of 50 files, its first lines",
	Prompt: func(string) string {
		return "Which is the largest of the 50 files under logs/, in bytes, and what are its first 3 lines? " +
			"Answer as: logs/NAME, N bytes, then its first 3 lines, each on a line of its own."
	},
	Fixture: writeLogs,
	Next: func(_ string, steps [][]string) ([]toolCall, string, error) {
		switch len(steps) {
		case 0:
			return []toolCall{{"list_files", map[string]any{"path": "logs"}}}, "", nil
		case 1:
			var calls []toolCall
			for _, name := range strings.Fields(steps[0][0]) {
				calls = append(calls, toolCall{"read_file", map[string]any{"path": "logs/" + name}})
			}
			return calls, "", nil
		}
		names := strings.Fields(steps[0][0])
		best := 0
		for i, out := range steps[1] {
			if len(out) > len(steps[1][best]) {
				best = i
			}
		}
		return nil, largestAnswer("logs/"+names[best], steps[1][best]), nil
	},
	Script: func(string) string {
		return `best, text = "", ""
for name in list_files(path = "logs").splitlines():
    t = read_file(path = "logs/" + name)
    if len(t) > len(text):
        best, text = name, t
result = {"path": "logs/" + best, "text": "\n".join(text.splitlines()[:3]) + "\n", "bytes": len(text)}
`
	},
	Answer: func(result json.RawMessage) (string, error) {
		var r struct {
			Path, Text string
			Bytes      int
		}
		if err := json.Unmarshal(result, &r); err != nil {
			return "", fmt.Errorf("the script's result %s: %w", result, err)
		}
		return fmt.Sprintf("%s, %d bytes\n%s", r.Path, r.Bytes, firstLines(r.Text, 3)), nil
	},
}

// largestAnswer formats the largest file's path, size and first 3 lines.
func largestAnswer(path, content string) string {
	return fmt.Sprintf("%s, %d bytes\n%s", path, len(content), firstLines(content, 3))
}

// firstLines returns the first n lines of s, without their newlines,
// joined by newlines.
func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// writeLogs writes logs/: 50 log files of 4 to 298 lines (each count once,
// in a shuffled order), every line the same length, so the largest in
// bytes is the longest in lines.
func writeLogs(ws string) (string, error) {
	rng := rand.New(rand.NewPCG(2, 50))
	dir := filepath.Join(ws, "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	sizes := rng.Perm(50)
	services := []string{"api", "auth", "billing", "cron", "mailer"}
	levels := []string{"INFO ", "WARN ", "DEBUG", "ERROR"}
	best, bestText := "", ""
	for i, k := range sizes {
		name := fmt.Sprintf("%s-%02d.log", services[i%len(services)], i)
		var b strings.Builder
		for l := range 4 + 6*k {
			fmt.Fprintf(&b, "2026-03-%02dT%02d:%02d:%02dZ %s worker-%d processed batch %05d in %03dms\n", 1+i%28, l/60%24, l%60,
				rng.IntN(60), levels[rng.IntN(len(levels))], rng.IntN(10), rng.IntN(100000), rng.IntN(1000))
		}
		if b.Len() > len(bestText) {
			best, bestText = name, b.String()
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			return "", err
		}
	}
	return largestAnswer("logs/"+best, bestText), nil
}

// titlesTask: list the titles of the 10 pages a local site's index links
// to. A competent model fetches the index, then the 10 pages in one turn.
var titlesTask = codeTask{
	Name: "titles of 10 local pages",
	Prompt: func(base string) string {
		return "The site at " + base + "/ links to 10 pages from its index. Fetch them and list their titles in the index's order, " +
			"one a line, as: PATH: TITLE."
	},
	Fixture: func(string) (string, error) { return titlesAnswer(codePageTitles()), nil },
	Next: func(base string, steps [][]string) ([]toolCall, string, error) {
		var bodies []string
		for _, step := range steps {
			for _, out := range step {
				body, err := httpBody(out)
				if err != nil {
					return nil, "", err
				}
				bodies = append(bodies, body)
			}
		}
		switch len(steps) {
		case 0:
			return []toolCall{{"http_request", map[string]any{"url": base + "/"}}}, "", nil
		case 1:
			var calls []toolCall
			for _, href := range hrefs(bodies[0]) {
				calls = append(calls, toolCall{"http_request", map[string]any{"url": base + href}})
			}
			return calls, "", nil
		}
		var titles [][2]string
		for i, href := range hrefs(bodies[0]) {
			titles = append(titles, [2]string{href, between(bodies[1+i], "<title>", "</title>")})
		}
		return nil, titlesAnswer(titles), nil
	},
	Script: func(base string) string {
		return fmt.Sprintf(`base = %q
titles = []
for part in http_request(url = base + "/")["body"].split('<a href="')[1:]:
    href = part.split('"')[0]
    body = http_request(url = base + href)["body"]
    titles.append([href, body.split("<title>")[1].split("</title>")[0]])
result = titles
`, base)
	},
	Answer: func(result json.RawMessage) (string, error) {
		var titles [][2]string
		if err := json.Unmarshal(result, &titles); err != nil {
			return "", fmt.Errorf("the script's result %s: %w", result, err)
		}
		return titlesAnswer(titles), nil
	},
}

// httpBody returns the body of an http_request result (its stdout).
func httpBody(out string) (string, error) {
	var r struct{ Body string }
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return "", fmt.Errorf("http_request's result %.200s: %w", out, err)
	}
	return r.Body, nil
}

// titlesAnswer formats the pages' paths and titles, one a line.
func titlesAnswer(titles [][2]string) string {
	lines := make([]string, len(titles))
	for i, t := range titles {
		lines[i] = t[0] + ": " + t[1]
	}
	return strings.Join(lines, "\n")
}

// hrefs returns the targets of the anchors in an HTML page, in order.
func hrefs(body string) []string {
	var out []string
	for _, part := range strings.Split(body, `<a href="`)[1:] {
		href, _, _ := strings.Cut(part, `"`)
		out = append(out, href)
	}
	return out
}

// between returns the text of s between the first start and the end after
// it, "" when there is none.
func between(s, start, end string) string {
	_, after, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	text, _, _ := strings.Cut(after, end)
	return text
}

// codePageTitles are the 10 pages' paths and titles, in the index's order.
func codePageTitles() [][2]string {
	topics := []string{"Getting started", "Configuration", "Roles and tool groups", "Writing a module", "The network policy",
		"Sandboxing commands", "Events and audit", "Approvals", "Metrics and tracing", "Upgrading"}
	out := make([][2]string, len(topics))
	for i, t := range topics {
		out[i] = [2]string{fmt.Sprintf("/docs/%02d-%s.html", i+1, strings.ToLower(strings.ReplaceAll(t, " ", "-"))), t + " — Example Docs"}
	}
	return out
}

// codePages serves the index and its 10 pages: realistic documentation
// pages of 2 to 4 KB, a head, a navigation bar, paragraphs.
func codePages() http.Handler {
	pages := codePageTitles()
	rng := rand.New(rand.NewPCG(3, 10))
	words := strings.Fields("the host loads each module from its block and routes every call through the same pipeline of policy " +
		"validation approval limits and events so that an operator can see what an agent did and why it was allowed")
	// page wraps a page's main part; the index has no navigation bar,
	// so that its anchors are the 10 pages'.
	page := func(title, main string, withNav bool) string {
		var nav strings.Builder
		if withNav {
			nav.WriteString("<nav><ul><li><a href=\"/\">Home</a></li>")
			for _, p := range pages {
				fmt.Fprintf(&nav, `<li><a href="%s">%s</a></li>`, p[0], strings.TrimSuffix(p[1], " — Example Docs"))
			}
			nav.WriteString("</ul></nav>\n")
		}
		return fmt.Sprintf("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width\">\n"+
			"<title>%s</title>\n<link rel=\"stylesheet\" href=\"/static/site.css\">\n</head>\n<body>\n%s<main>\n%s</main>\n"+
			"<footer>Example Docs. Last updated 2026-03-01.</footer>\n</body>\n</html>\n", title, nav.String(), main)
	}
	mux := http.NewServeMux()
	var index strings.Builder
	index.WriteString("<h1>Example Docs</h1>\n<p>Start here.</p>\n<ul>\n")
	for _, p := range pages {
		fmt.Fprintf(&index, "<li><a href=\"%s\">%s</a></li>\n", p[0], strings.TrimSuffix(p[1], " — Example Docs"))
		var body strings.Builder
		fmt.Fprintf(&body, "<h1>%s</h1>\n", strings.TrimSuffix(p[1], " — Example Docs"))
		for range 4 + rng.IntN(6) {
			body.WriteString("<p>")
			for w := range 40 + rng.IntN(30) {
				if w > 0 {
					body.WriteString(" ")
				}
				body.WriteString(words[rng.IntN(len(words))])
			}
			body.WriteString(".</p>\n")
		}
		html := page(p[1], body.String(), true)
		mux.HandleFunc("GET "+p[0], func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, html)
		})
	}
	index.WriteString("</ul>\n")
	mux.Handle("GET /api/issues", codeIssuesAPI())
	home := page("Example Docs", index.String(), false)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, home)
	})
	return mux
}

// issuesTask: count the open issues of a local tracker's API, which gives
// 25 a page over 12 pages, each naming the next by an opaque cursor, and
// name the open one of the highest priority. Each page's cursor comes from
// the page before, so call by call takes a turn a page, parallel calls or
// not; a script walks the pages in one call.
var issuesTask = codeTask{
	Name: "open issues over 12 pages of an API",
	Prompt: func(base string) string {
		return "The issue tracker at " + base + "/api/issues lists its issues as JSON, 25 a page; each page gives the path of the next in " +
			"\"next\" (null on the last). How many issues are open, and which open issue has the highest priority (1 is the highest; " +
			"the lowest id among equals)? Answer as: N open; the highest priority: #ID TITLE (priority P)."
	},
	Fixture: func(string) (string, error) { return issuesAnswer(codeIssues()), nil },
	Next: func(base string, steps [][]string) ([]toolCall, string, error) {
		next := "/api/issues"
		var all []codeIssue
		for _, step := range steps {
			body, err := httpBody(step[0])
			if err != nil {
				return nil, "", err
			}
			var page codeIssuePage
			if err := json.Unmarshal([]byte(body), &page); err != nil {
				return nil, "", fmt.Errorf("a page of issues %.200s: %w", body, err)
			}
			all, next = append(all, page.Issues...), ""
			if page.Next != nil {
				next = *page.Next
			}
		}
		if next != "" {
			return []toolCall{{"http_request", map[string]any{"url": base + next}}}, "", nil
		}
		return nil, issuesAnswer(all), nil
	},
	Script: func(base string) string {
		return fmt.Sprintf(`base = %q
path, count, best = "/api/issues", 0, None
for _ in range(1000):
    page = json.decode(http_request(url = base + path)["body"])
    for i in page["issues"]:
        if i["state"] == "open":
            count += 1
            if best == None or [i["priority"], i["id"]] < [best["priority"], best["id"]]:
                best = i
    path = page["next"]
    if path == None:
        break
result = {"open": count, "best": best}
`, base)
	},
	Answer: func(result json.RawMessage) (string, error) {
		var r struct {
			Open int
			Best codeIssue
		}
		if err := json.Unmarshal(result, &r); err != nil {
			return "", fmt.Errorf("the script's result %s: %w", result, err)
		}
		return issuesSummary(r.Open, r.Best), nil
	},
}

// codeIssue is an issue of the tracker's API, as it gives it.
type codeIssue struct {
	ID        int      `json:"id"`
	Title     string   `json:"title"`
	State     string   `json:"state"`
	Priority  int      `json:"priority"`
	Assignee  string   `json:"assignee"`
	Labels    []string `json:"labels"`
	Comments  int      `json:"comments"`
	CreatedAt string   `json:"created_at"`
	UpdatedAt string   `json:"updated_at"`
	URL       string   `json:"url"`
}

// codeIssuePage is a page of the tracker's API.
type codeIssuePage struct {
	Issues []codeIssue `json:"issues"`
	Next   *string     `json:"next"` // null on the last page
}

// issuesAnswer counts the open issues and finds the open one of the
// highest priority (the lowest id among equals).
func issuesAnswer(issues []codeIssue) string {
	count, best := 0, codeIssue{}
	for _, i := range issues {
		if i.State != "open" {
			continue
		}
		count++
		if best.ID == 0 || i.Priority < best.Priority || i.Priority == best.Priority && i.ID < best.ID {
			best = i
		}
	}
	return issuesSummary(count, best)
}

// issuesSummary formats the task's answer.
func issuesSummary(open int, best codeIssue) string {
	return fmt.Sprintf("%d open; the highest priority: #%d %s (priority %d)", open, best.ID, best.Title, best.Priority)
}

// codeIssues are the tracker's 300 issues, in the API's order (newest
// first).
func codeIssues() []codeIssue {
	rng := rand.New(rand.NewPCG(4, 300))
	verbs := []string{"Crash when", "Slow response when", "Wrong total when", "Timeout when", "Missing log line when", "Bad error message when"}
	whats := []string{"the queue is full", "a config file is empty", "two agents share a key", "the database restarts",
		"a token expires mid-call", "a plugin exits", "the page is reloaded", "an approval times out"}
	people := []string{"ana", "bo", "chen", "dara", "eli", ""}
	labels := []string{"bug", "perf", "docs", "api", "ui", "store"}
	out := make([]codeIssue, 300)
	for k := range out {
		id := 1200 - k*3 - rng.IntN(3)
		state := "closed"
		if rng.IntN(5) < 2 {
			state = "open"
		}
		i := codeIssue{ID: id, Title: verbs[rng.IntN(len(verbs))] + " " + whats[rng.IntN(len(whats))], State: state,
			Priority: 1 + rng.IntN(5), Assignee: people[rng.IntN(len(people))], Comments: rng.IntN(12),
			CreatedAt: fmt.Sprintf("2026-%02d-%02dT%02d:%02d:00Z", 1+k/30%9, 1+rng.IntN(28), rng.IntN(24), rng.IntN(60)),
			URL:       fmt.Sprintf("/issues/%d", id)}
		i.UpdatedAt = i.CreatedAt
		for range 1 + rng.IntN(2) {
			if l := labels[rng.IntN(len(labels))]; !slices.Contains(i.Labels, l) {
				i.Labels = append(i.Labels, l)
			}
		}
		out[k] = i
	}
	return out
}

// codeIssuesAPI serves codeIssues 25 a page: /api/issues is the first
// page, and each page names the next by a cursor that says nothing of
// where it leads.
func codeIssuesAPI() http.Handler {
	issues := codeIssues()
	const perPage = 25
	cursors := map[string]int{} // cursor: the page's first issue
	rng := rand.New(rand.NewPCG(5, 12))
	next := map[int]string{} // a page's first issue: its cursor
	for first := perPage; first < len(issues); first += perPage {
		c := fmt.Sprintf("%016x", rng.Uint64())
		cursors[c], next[first] = first, c
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := 0
		if c := r.URL.Query().Get("cursor"); c != "" {
			var ok bool
			if first, ok = cursors[c]; !ok {
				http.Error(w, `{"error":"unknown cursor"}`, http.StatusBadRequest)
				return
			}
		}
		page := codeIssuePage{Issues: issues[first:min(first+perPage, len(issues))]}
		if c, ok := next[first+perPage]; ok {
			path := "/api/issues?cursor=" + c
			page.Next = &path
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page)
	})
}
