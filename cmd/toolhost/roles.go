package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/store"
)

const rolesUsage = `usage:
  toolhost roles list [-config F] [-json]
  toolhost roles show [-config F] [-json] NAME
  toolhost roles create [-config F] [-description D] [-prompt P] [-groups a,b] [-allow x,y] [-deny x,y] [-read-only] NAME
  toolhost roles set-groups [-config F] NAME [GROUP...]    (no group: every group is available)
  toolhost roles set-deferred [-config F] NAME [GROUP...]  (their tools load on demand; no group: none)
  toolhost roles delete [-config F] NAME`

// rolesCmd lists and edits roles. Config roles are reconciled first; only
// the subcommands that name groups start the modules, to check the group
// ids against them. A running server notices the edits within a second.
func rolesCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, rolesUsage)
		return 2
	}
	sub := args[0]
	fs, c := newFlags("roles "+sub, stderr, "warn")
	asJSON := fs.Bool("json", false, "print JSON")
	desc := fs.String("description", "", "what the role is for (create)")
	prompt := fs.String("prompt", "", "the role's system prompt (create)")
	groups := fs.String("groups", "", "comma-separated tool groups; empty: every group (create)")
	allow := fs.String("allow", "", "comma-separated optional tools, groups or group:plugins to allow (create)")
	deny := fs.String("deny", "", "comma-separated tools, groups or group:plugins to deny (create)")
	readOnly := fs.Bool("read-only", false, "keep only the tools marked read-only (MCP's readOnlyHint) of the role's groups (create)")
	if fs.Parse(args[1:]) != nil {
		return 2
	}
	want := map[string]int{"list": 0, "show": 1, "create": 1, "delete": 1, "set-groups": -1, "set-deferred": -1}
	n, ok := want[sub]
	if !ok || (n >= 0 && fs.NArg() != n) || (n < 0 && fs.NArg() < 1) {
		fmt.Fprintln(stderr, rolesUsage)
		return 2
	}
	open := c.withRoles
	if (sub == "create" && *groups != "") || (n < 0 && fs.NArg() > 1) {
		open = c.withHost
	}
	return open(stderr, func(ctx context.Context, h *host.Host) int {
		var role store.Role
		var err error
		switch sub {
		case "list":
			printRoles(stdout, h.Roles().List(), *asJSON)
			return 0
		case "show":
			role, err = h.Roles().Get(fs.Arg(0))
		case "create":
			role, err = h.Roles().Create(ctx, host.RoleSpec{Name: fs.Arg(0), Description: *desc, Prompt: *prompt,
				ToolGroups: splitList(*groups), Allow: splitList(*allow), Deny: splitList(*deny), ReadOnlyTools: *readOnly, CreatedBy: "cli"})
		case "set-groups":
			ids := groupArgs(fs.Args()[1:])
			role, err = h.Roles().Update(ctx, fs.Arg(0), host.RoleUpdate{ToolGroups: &ids})
		case "set-deferred":
			ids := groupArgs(fs.Args()[1:])
			role, err = h.Roles().Update(ctx, fs.Arg(0), host.RoleUpdate{DeferredGroups: &ids})
		case "delete":
			if err = h.Roles().Delete(ctx, fs.Arg(0)); err == nil {
				fmt.Fprintf(stdout, "deleted role %s\n", fs.Arg(0))
				return 0
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "toolhost: %s: %v\n", toolhost.CodeOf(err), err)
			return 1
		}
		if *asJSON {
			printJSON(stdout, role)
			return 0
		}
		printRole(stdout, role)
		return 0
	})
}

// splitList splits a comma-separated flag; empty means nil.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// groupArgs are the group ids given after a role's name, as separate
// arguments or comma-separated; none is nil.
func groupArgs(args []string) []string {
	var ids []string
	for _, a := range args {
		ids = append(ids, splitList(a)...)
	}
	return ids
}

func groupsText(r store.Role) string {
	if r.ToolGroups == nil || len(r.ToolGroups) == 0 {
		return "(all groups)"
	}
	return strings.Join(r.ToolGroups, ",")
}

// deferredText names the role's deferred groups, "-" for none.
func deferredText(r store.Role) string {
	if len(r.Deferred) == 0 {
		return "-"
	}
	return strings.Join(r.Deferred, ",")
}

func printRoles(w io.Writer, roles []store.Role, asJSON bool) {
	_ = printList(w, roles, asJSON, "ROLE\tSOURCE\tTOOL GROUPS\tDEFERRED\tDESCRIPTION", func(r store.Role) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", r.Name, r.Source, groupsText(r), deferredText(r), r.Description)
	})
}

func printRole(w io.Writer, r store.Role) {
	fmt.Fprintf(w, "name:        %s\nid:          %s\nsource:      %s\ntool groups: %s\n", r.Name, r.ID, r.Source, groupsText(r))
	if len(r.Deferred) > 0 {
		fmt.Fprintf(w, "deferred:    %s (loaded on demand)\n", deferredText(r))
	}
	if len(r.Allow) > 0 || len(r.Deny) > 0 {
		fmt.Fprintf(w, "allow:       %s\ndeny:        %s\n", strings.Join(r.Allow, ","), strings.Join(r.Deny, ","))
	}
	if r.ReadOnlyTools {
		fmt.Fprintln(w, "tools:       read-only (only those marked readOnlyHint)")
	}
	fmt.Fprintf(w, "description: %s\nprompt:      %s\ncreated:     %s by %s\n", r.Description, r.Prompt, r.CreatedAt.Format("2006-01-02 15:04:05Z07:00"), r.CreatedBy)
	if ro, why := r.ReadOnly(); ro {
		fmt.Fprintf(w, "read-only:   %s\n", why)
	}
}

// toolsCmd lists the tools a role sees.
func toolsCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newFlags("tools", stderr, "warn")
	role := fs.String("role", "", "the role whose tools to list; empty: a caller without a role")
	asJSON := fs.Bool("json", false, "print the role's tool list as JSON (definitions, metadata, token counts)")
	tokens := fs.Bool("tokens", false, "print the token count of the role's tool definitions beside that of all tools, and, when the role defers groups, of those an agent starts with")
	if fs.Parse(args) != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	return c.withHost(stderr, func(_ context.Context, h *host.Host) int {
		rt, err := h.Tools(host.ToolQuery{Role: *role, Tokens: true})
		if err != nil {
			fmt.Fprintf(stderr, "toolhost: %s: %v\n", toolhost.CodeOf(err), err)
			return 1
		}
		if *asJSON {
			printJSON(stdout, rt)
			return 0
		}
		deferred := make(map[string]bool, len(rt.Deferred))
		for _, name := range rt.Deferred {
			deferred[name] = true
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL\tGROUP\tOPTIONAL\tDEFERRED\tDESCRIPTION")
		for _, d := range rt.Tools {
			m := rt.Meta[d.Function.Name]
			fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%s\n", d.Function.Name, m.Group, m.Optional, deferred[d.Function.Name], firstLine(d.Function.Description))
		}
		_ = tw.Flush()
		if *tokens {
			printTokens(stdout, rt)
		}
		return 0
	})
}

// printTokens prints what a role's tool definitions cost: all tools, the
// role's, and, when it defers groups, what an agent of it starts with
// (before it loads any deferred tool), each with what it saves.
func printTokens(w io.Writer, rt host.ToolList) {
	fmt.Fprintln(w, "tokens (o200k_base):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  all tools\t%d\t%d tools\n", rt.AllTokens, rt.AllTools)
	who := fmt.Sprintf("role %q", rt.Role)
	if rt.Role == "" {
		who = "no role"
	}
	fmt.Fprintf(tw, "  %s\t%d\t%d tools\t%s\n", who, rt.Tokens, len(rt.Tools), below(rt.Tokens, rt.AllTokens))
	if len(rt.Deferred) > 0 {
		fmt.Fprintf(tw, "  at start\t%d\t%d tools\t%s; %d tools of deferred groups load on demand\n",
			rt.EagerTokens, len(rt.Tools)-len(rt.Deferred), below(rt.EagerTokens, rt.AllTokens), len(rt.Deferred))
	}
	_ = tw.Flush()
}

// below says how far n tokens are below all, in percent.
func below(n, all int) string {
	if all <= 0 {
		return ""
	}
	return fmt.Sprintf("%d%% below all tools", (all-n)*100/all)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
