package mcpsource

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestSummary: a group description from a server's instructions is plain
// text, one sentence, bounded.
func TestSummary(t *testing.T) {
	long := strings.Repeat("word ", 60)
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", ""},
		{"blank", " \n\n\t\n", ""},
		{"one line", "Reads and writes files.", "Reads and writes files."},
		{"the first sentence", "Reads files. Writes them too.", "Reads files."},
		{"a question or exclamation ends one", "Lost? Ask here.", "Lost?"},
		{"an abbreviation does not", "Tools for notes, e.g. todo lists. More below.", "Tools for notes, e.g. todo lists."},
		{"a version or a domain does not", "Wraps api.example.com v1.2 for you. Then more.", "Wraps api.example.com v1.2 for you."},
		{"a quote after the stop", `Say "hello." Then go.`, `Say "hello."`},
		// The everything server's instructions open so (server-everything 2026.8.31).
		{"a heading before prose", "# Everything Server – Server Instructions\n\nAudience: These instructions are written for an LLM or autonomous agent integrating with the Everything MCP Server.\nFollow them to use, extend, and troubleshoot the server safely and effectively.\n\n## Cross-Feature Relationships\n",
			"Audience: These instructions are written for an LLM or autonomous agent integrating with the Everything MCP Server."},
		{"a heading alone", "## Weather tools ##\n", "Weather tools"},
		{"a setext heading", "Weather\n=======\n\nForecasts by city.", "Forecasts by city."},
		{"lines of a paragraph join", "Searches the\nweb for pages", "Searches the web for pages"},
		{"emphasis", "**Always** call *search* first, __then__ _fetch_, ~~never~~ guess.", "Always call search first, then fetch, never guess."},
		{"snake_case is no emphasis", "Call read_file or list_dir.", "Call read_file or list_dir."},
		{"inline code", "Use `get_file_info` before ``a `b` c``.", "Use get_file_info before a `b` c."},
		{"code keeps its stars", "Globs like `*.go` work.", "Globs like *.go work."},
		{"links and images", "See [the docs](https://x.example/docs) ![logo](l.png) or <https://x.example>.", "See the docs logo or https://x.example."},
		{"reference links", "Read [the guide][1].\n\n[1]: https://x.example", "Read the guide."},
		{"HTML", "Gives <b>weather</b><br/> data.", "Gives weather data."},
		{"escapes", `Matches \*literal\* stars \_ too.`, "Matches *literal* stars _ too."},
		{"a code block is skipped", "```json\n{\"a\": 1}\n```\nQueries the database.", "Queries the database."},
		{"an unclosed code block hides the rest", "~~~\ncode\n", ""},
		{"a list item", "- **Search** the index. Then read.\n- Other", "Search the index."},
		{"a numbered item", "1. Open a page", "Open a page"},
		{"a quote", "> Note: read-only.", "Note: read-only."},
		{"a table is skipped", "| a | b |\n|---|---|\n\nTabular tools.", "Tabular tools."},
		{"a rule is skipped", "***\n\nAfter the rule.", "After the rule."},
		{"bounded at a word", long, strings.TrimSpace(strings.Repeat("word ", 31)) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := summary(tc.in)
			if got != tc.want {
				t.Errorf("summary(%q)\n = %q\nwant %q", tc.in, got, tc.want)
			}
			if n := utf8.RuneCountInString(got); n > maxSummary {
				t.Errorf("%d characters, more than %d", n, maxSummary)
			}
		})
	}
}

// FuzzSummary: whatever the instructions, the description is valid UTF-8
// when they are, one line, and bounded.
func FuzzSummary(f *testing.F) {
	for _, s := range []string{"# T\n\nA *b* `c` [d](e).", "```\nx", "a\\*b_c_", strings.Repeat("é", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := summary(in)
		if utf8.ValidString(in) && !utf8.ValidString(got) {
			t.Fatalf("summary(%q) = %q: not UTF-8", in, got)
		}
		if strings.ContainsAny(got, "\n\r") || utf8.RuneCountInString(got) > maxSummary {
			t.Fatalf("summary(%q) = %q", in, got)
		}
	})
}
