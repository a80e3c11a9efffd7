package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// conformanceRun are the server scenarios of @modelcontextprotocol/conformance
// that apply to a host without the suite's own test tools: they ask only
// what any MCP server must answer. docs/mcp-conformance.md lists them.
var conformanceRun = []string{
	"server-initialize",
	"ping",
	"tools-list",
	"server-sse-multiple-streams",
	"dns-rebinding-protection",
}

// conformanceSkipped are the other server scenarios, each with why it does
// not apply (docs/mcp-conformance.md says the same): they call a tool,
// prompt or resource of the suite's reference server, which toolhost does
// not have, or a feature toolhost does not offer.
var conformanceSkipped = map[string]string{
	"logging-set-level":             "toolhost does not declare the logging capability, and logging/setLevel is deprecated in 2026-07-28",
	"completion-complete":           "calls completion/complete on the suite's prompt test_prompt_with_arguments; toolhost offers no prompts and no completions",
	"tools-call-simple-text":        "calls the suite's tool test_simple_text",
	"tools-call-image":              "calls the suite's tool test_image_content",
	"tools-call-audio":              "calls the suite's tool test_audio_content",
	"tools-call-embedded-resource":  "calls the suite's tool test_embedded_resource",
	"tools-call-mixed-content":      "calls the suite's tool test_multiple_content_types",
	"tools-call-with-logging":       "calls the suite's tool test_tool_with_logging",
	"tools-call-error":              "calls the suite's tool test_error_handling",
	"tools-call-with-progress":      "calls the suite's tool test_tool_with_progress",
	"tools-call-sampling":           "calls the suite's tool test_sampling",
	"tools-call-elicitation":        "calls the suite's tool test_elicitation",
	"json-schema-2020-12":           "lists the suite's tool json_schema_2020_12_tool",
	"elicitation-sep1034-defaults":  "calls the suite's tool test_elicitation_sep1034_defaults",
	"elicitation-sep1330-enums":     "calls the suite's tool test_elicitation_sep1330_enums",
	"server-sse-polling":            "calls the suite's tool test_reconnection",
	"resources-list":                "toolhost offers no resources",
	"resources-read-text":           "reads the suite's resource test://static-text",
	"resources-read-binary":         "reads the suite's resource test://static-binary",
	"resources-templates-read":      "reads the suite's resource template test://template/{id}/data",
	"resources-subscribe":           "subscribes to the suite's resource test://watched-resource",
	"resources-unsubscribe":         "unsubscribes from the suite's resource test://watched-resource",
	"prompts-list":                  "toolhost offers no prompts",
	"prompts-get-simple":            "gets the suite's prompt test_simple_prompt",
	"prompts-get-with-args":         "gets the suite's prompt test_prompt_with_arguments",
	"prompts-get-embedded-resource": "gets the suite's prompt test_prompt_with_embedded_resource",
	"prompts-get-with-image":        "gets the suite's prompt test_prompt_with_image",
}

// TestConformance runs the server scenarios of the MCP conformance suite
// (@modelcontextprotocol/conformance 0.1.16) that apply to a host against
// a real `toolhost serve`'s /mcp/developer, each on its own, and fails on
// any check the suite reports as a FAILURE (a WARNING is logged). The
// suite's client sends no credential and wants a localhost URL, so it talks
// to a proxy on 127.0.0.1 that adds the role's bearer token and keeps the
// Host header the suite sends. Every server scenario the suite lists must
// be run or skipped with a reason, so that a new one is decided on.
func TestConformance(t *testing.T) {
	node := npmNode(t)
	suite := filepath.Join(mcptest.NPMPackage(t, "@modelcontextprotocol/conformance"), "dist", "index.js")
	srv := newServe(t, fmt.Sprintf(erasConfig, pluginDir))
	srv.start()
	proxy := newWireProxy(t, srv.base+"/mcp/developer", srv.roleToken("developer", "conformance", ""))

	t.Run("listed", func(t *testing.T) {
		out, err := exec.Command(node, suite, "list", "--server").CombinedOutput()
		if err != nil {
			t.Fatalf("conformance list: %v\n%s", err, out)
		}
		var listed []string
		for _, m := range regexp.MustCompile(`(?m)^\s+- ([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
			listed = append(listed, m[1])
			if !slices.Contains(conformanceRun, m[1]) && conformanceSkipped[m[1]] == "" {
				t.Errorf("server scenario %s is neither run nor skipped with a reason (conformanceRun, conformanceSkipped, docs/mcp-conformance.md)", m[1])
			}
		}
		for _, name := range append(slices.Clone(conformanceRun), slices.Collect(maps.Keys(conformanceSkipped))...) {
			if !slices.Contains(listed, name) {
				t.Errorf("scenario %s is no longer listed by the suite", name)
			}
		}
	})

	for _, scenario := range conformanceRun {
		t.Run(scenario, func(t *testing.T) {
			out := t.TempDir()
			first := proxy.count()
			cmd := exec.Command(node, suite, "server", "--url", proxy.URL, "--scenario", scenario, "-o", out)
			cmd.Dir = t.TempDir()
			var output bytes.Buffer
			cmd.Stdout, cmd.Stderr = &output, &output
			runErr := runWithin(cmd, proctest.Patience)
			files, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
			if len(files) != 1 {
				t.Fatalf("checks.json: %q (%v)\n%s", files, runErr, clip(output.String(), 8000))
			}
			b, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			var checks []struct {
				ID, Name, Description, Status, ErrorMessage string
				Details                                     json.RawMessage
			}
			if err := json.Unmarshal(b, &checks); err != nil {
				t.Fatalf("%s: %v", files[0], err)
			}
			failed := false
			for _, c := range checks {
				switch c.Status {
				case "FAILURE":
					failed = true
					t.Errorf("%s (%s): %s\n  details: %s", c.Name, c.Description, c.ErrorMessage, clip(string(c.Details), 2000))
				case "WARNING":
					t.Logf("warning: %s (%s): %s", c.Name, c.Description, c.ErrorMessage)
				case "SUCCESS":
					t.Logf("ok: %s", c.Name)
				}
			}
			if runErr != nil && !failed {
				t.Errorf("the suite exited with %v but reported no failed check\n%s", runErr, clip(output.String(), 8000))
			}
			if failed {
				t.Logf("%s", exchangesString(proxy.recorded(first)))
			}
			if len(checks) == 0 {
				t.Errorf("no checks")
			}
		})
	}
}

// TestConformanceDocs: docs/mcp-conformance.md names every scenario run and
// every one skipped.
func TestConformanceDocs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "mcp-conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, name := range append(slices.Clone(conformanceRun), slices.Collect(maps.Keys(conformanceSkipped))...) {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/mcp-conformance.md does not name `%s`", name)
		}
	}
}
