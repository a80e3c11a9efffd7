package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/store"
)

// rolesUsage is `toolhost roles`. Roles declared in the config are
// reconciled into the store first; only the subcommands that name groups
// start the modules, to check the group ids against them. A running
// server notices the edits within a second.
var rolesUsage = &usage{
	name:    "roles",
	summary: "list and edit roles: the tool groups each role's agents may use",
	details: `A role declared in the config file is read-only here (edit the file); the others are the
store's, shared with the page and the API. A running server notices an edit within a second.`,
	example: `toolhost roles list
toolhost roles create tester -groups workspace,command`,
	subs: []*usage{rolesListUsage, rolesShowUsage, rolesCreateUsage, rolesSetGroupsUsage, rolesSetDeferredUsage, rolesDeleteUsage},
}

var (
	rolesListUsage = &usage{
		name:    "roles list",
		summary: "list the roles: source, tool groups, deferred groups, description",
		example: "toolhost roles list -json",
	}
	rolesShowUsage = &usage{
		name:    "roles show",
		args:    "NAME",
		min:     1,
		max:     1,
		summary: "show one role",
		example: "toolhost roles show developer",
	}
	rolesCreateUsage = &usage{
		name:    "roles create",
		args:    "NAME",
		min:     1,
		max:     1,
		summary: "create a role in the store",
		details: "With -groups the modules are started to check the group ids against those they give.",
		example: `toolhost roles create tester -groups workspace,command -description "runs the tests"`,
	}
	rolesSetGroupsUsage = &usage{
		name:    "roles set-groups",
		args:    "NAME [GROUP...]",
		min:     1,
		max:     -1,
		summary: "set a role's tool groups (no group: every group is available)",
		details: "Groups may be separate arguments or comma-separated.",
		example: "toolhost roles set-groups tester workspace command",
	}
	rolesSetDeferredUsage = &usage{
		name:    "roles set-deferred",
		args:    "NAME [GROUP...]",
		min:     1,
		max:     -1,
		summary: "set the groups whose tools the role's agents load on demand (no group: none)",
		details: "Groups may be separate arguments or comma-separated.",
		example: "toolhost roles set-deferred developer chrome network",
	}
	rolesDeleteUsage = &usage{
		name:    "roles delete",
		args:    "NAME",
		min:     1,
		max:     1,
		summary: "delete a role of the store",
		example: "toolhost roles delete tester",
	}
)

func rolesListCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(rolesListUsage, stdout, stderr, "warn")
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	return c.withRoles(stderr, func(_ context.Context, h *host.Host) int {
		printRoles(stdout, h.Roles().List(), *asJSON)
		return 0
	})
}

func rolesShowCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(rolesShowUsage, stdout, stderr, "warn")
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	return c.withRoles(stderr, func(_ context.Context, h *host.Host) int {
		role, err := h.Roles().Get(fs.Arg(0))
		return roleOutcome(stdout, stderr, role, err, *asJSON)
	})
}

func rolesCreateCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(rolesCreateUsage, stdout, stderr, "warn")
	asJSON := fs.Bool("json", false, "print JSON")
	desc := fs.String("description", "", "what the role is for")
	prompt := fs.String("prompt", "", "the role's system prompt")
	groups := fs.String("groups", "", "comma-separated tool `list` of groups; empty: every group")
	allow := fs.String("allow", "", "comma-separated optional tools, groups or group:plugins to allow")
	deny := fs.String("deny", "", "comma-separated tools, groups or group:plugins to deny")
	readOnly := fs.Bool("read-only", false, "keep only the tools marked read-only (MCP's readOnlyHint) of the role's groups")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	open := c.withRoles
	if *groups != "" {
		open = c.withHost
	}
	return open(stderr, func(ctx context.Context, h *host.Host) int {
		role, err := h.Roles().Create(ctx, host.RoleSpec{Name: fs.Arg(0), Description: *desc, Prompt: *prompt,
			ToolGroups: splitList(*groups), Allow: splitList(*allow), Deny: splitList(*deny), ReadOnlyTools: *readOnly, CreatedBy: "cli"})
		return roleOutcome(stdout, stderr, role, err, *asJSON)
	})
}

func rolesSetGroupsCmd(args []string, stdout, stderr io.Writer) int {
	return setRoleGroups(rolesSetGroupsUsage, args, stdout, stderr, func(ids []string) host.RoleUpdate { return host.RoleUpdate{ToolGroups: &ids} })
}

func rolesSetDeferredCmd(args []string, stdout, stderr io.Writer) int {
	return setRoleGroups(rolesSetDeferredUsage, args, stdout, stderr, func(ids []string) host.RoleUpdate { return host.RoleUpdate{DeferredGroups: &ids} })
}

// setRoleGroups runs `roles set-groups` or `roles set-deferred` (u): the
// role's update made of the groups named after it. Naming groups starts
// the modules, to check the ids.
func setRoleGroups(u *usage, args []string, stdout, stderr io.Writer, update func([]string) host.RoleUpdate) int {
	fs, c := newHostFlags(u, stdout, stderr, "warn")
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	open := c.withRoles
	if fs.NArg() > 1 {
		open = c.withHost
	}
	return open(stderr, func(ctx context.Context, h *host.Host) int {
		role, err := h.Roles().Update(ctx, fs.Arg(0), update(groupArgs(fs.Args()[1:])))
		return roleOutcome(stdout, stderr, role, err, *asJSON)
	})
}

func rolesDeleteCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(rolesDeleteUsage, stdout, stderr, "warn")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	return c.withRoles(stderr, func(ctx context.Context, h *host.Host) int {
		if err := h.Roles().Delete(ctx, fs.Arg(0)); err != nil {
			return roleOutcome(stdout, stderr, store.Role{}, err, false)
		}
		fmt.Fprintf(stdout, "deleted role %s\n", fs.Arg(0))
		return 0
	})
}

// roleOutcome prints a role subcommand's outcome: its error (exit status
// 1), or the role, as JSON or as text.
func roleOutcome(stdout, stderr io.Writer, role store.Role, err error, asJSON bool) int {
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %s: %v\n", toolhost.CodeOf(err), err)
		return 1
	}
	if asJSON {
		printJSON(stdout, role)
		return 0
	}
	printRole(stdout, role)
	return 0
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
	if r.Code != (rules.CodeBounds{}) {
		code, _ := json.Marshal(r.Code)
		fmt.Fprintf(w, "code:        %s (bounds of its scripts, over the config's)\n", code)
	}
	fmt.Fprintf(w, "description: %s\nprompt:      %s\ncreated:     %s by %s\n", r.Description, r.Prompt, r.CreatedAt.Format("2006-01-02 15:04:05Z07:00"), r.CreatedBy)
	if ro, why := r.ReadOnly(); ro {
		fmt.Fprintf(w, "read-only:   %s\n", why)
	}
}

// toolsUsage is `toolhost tools`.
var toolsUsage = &usage{
	name:    "tools",
	summary: "list the tools a role sees: group, optional, deferred, description",
	example: "toolhost tools -role developer -tokens",
}

// toolsCmd lists the tools a role sees.
func toolsCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(toolsUsage, stdout, stderr, "warn")
	role := fs.String("role", "", "the `role` whose tools to list; empty: a caller without a role")
	asJSON := fs.Bool("json", false, "print the role's tool list as JSON (definitions, metadata, token counts)")
	tokens := fs.Bool("tokens", false, "print what the role's tool definitions cost in tokens, beside all tools' (and, when it defers\ngroups, what an agent starts with)")
	if code, ok := fs.parse(args); !ok {
		return code
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
