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
  toolhost roles create [-config F] [-description D] [-prompt P] [-groups a,b] [-allow x,y] [-deny x,y] NAME
  toolhost roles set-groups [-config F] NAME [GROUP...]    (no group: every group is available)
  toolhost roles delete [-config F] NAME`

// rolesCmd lists and edits roles. It starts the host, so that config roles
// are reconciled and group ids checked against the running modules; a
// running server notices the edits within a second.
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
	if fs.Parse(args[1:]) != nil {
		return 2
	}
	want := map[string]int{"list": 0, "show": 1, "create": 1, "delete": 1, "set-groups": -1}
	n, ok := want[sub]
	if !ok || (n >= 0 && fs.NArg() != n) || (n < 0 && fs.NArg() < 1) {
		fmt.Fprintln(stderr, rolesUsage)
		return 2
	}
	return c.withHost(stderr, func(ctx context.Context, h *host.Host) int {
		var role store.Role
		var err error
		switch sub {
		case "list":
			printRoles(stdout, h.Roles(), *asJSON)
			return 0
		case "show":
			role, err = h.Role(fs.Arg(0))
		case "create":
			role, err = h.CreateRole(ctx, host.RoleSpec{Name: fs.Arg(0), Description: *desc, Prompt: *prompt,
				ToolGroups: splitList(*groups), Allow: splitList(*allow), Deny: splitList(*deny), CreatedBy: "cli"})
		case "set-groups":
			ids := fs.Args()[1:]
			if len(ids) == 0 {
				ids = nil
			}
			role, err = h.UpdateRole(ctx, fs.Arg(0), host.RoleUpdate{ToolGroups: &ids})
		case "delete":
			if err = h.DeleteRole(ctx, fs.Arg(0)); err == nil {
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

func groupsText(r store.Role) string {
	if r.ToolGroups == nil || len(r.ToolGroups) == 0 {
		return "(all groups)"
	}
	return strings.Join(r.ToolGroups, ",")
}

func printRoles(w io.Writer, roles []store.Role, asJSON bool) {
	_ = printList(w, roles, asJSON, "ROLE\tSOURCE\tTOOL GROUPS\tDESCRIPTION", func(r store.Role) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s", r.Name, r.Source, groupsText(r), r.Description)
	})
}

func printRole(w io.Writer, r store.Role) {
	fmt.Fprintf(w, "name:        %s\nid:          %s\nsource:      %s\ntool groups: %s\n", r.Name, r.ID, r.Source, groupsText(r))
	if len(r.Allow) > 0 || len(r.Deny) > 0 {
		fmt.Fprintf(w, "allow:       %s\ndeny:        %s\n", strings.Join(r.Allow, ","), strings.Join(r.Deny, ","))
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
	tokens := fs.Bool("tokens", false, "print the token count of the role's tool definitions beside that of all tools")
	if fs.Parse(args) != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	return c.withHost(stderr, func(_ context.Context, h *host.Host) int {
		rt, err := h.ToolsForRole(*role)
		if err != nil {
			fmt.Fprintf(stderr, "toolhost: %s: %v\n", toolhost.CodeOf(err), err)
			return 1
		}
		if *asJSON {
			printJSON(stdout, rt)
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL\tGROUP\tOPTIONAL\tDESCRIPTION")
		for _, d := range rt.Tools {
			m := rt.Meta[d.Function.Name]
			fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", d.Function.Name, m.Group, m.Optional, firstLine(d.Function.Description))
		}
		_ = tw.Flush()
		if *tokens {
			fmt.Fprintf(stdout, "tokens: %d for %d tools of role %q; %d for all %d tools (o200k_base)\n",
				rt.Tokens, len(rt.Tools), *role, rt.AllTokens, rt.AllTools)
		}
		return 0
	})
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
