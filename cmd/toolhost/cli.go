package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// usage describes a command or subcommand of toolhost: what its -h prints
// and what its usage errors say. Every command parses its arguments and
// prints its help through it (flags.parse, usage.help), so all of them
// read and behave alike.
type usage struct {
	// name is the words after "toolhost": "roles create"; "" for toolhost
	// itself.
	name string
	// args are the positional arguments in the synopsis ("NAME [GROUP...]");
	// alternative forms on separate lines.
	args string
	// summary says in one line what the command does.
	summary string
	// details, optional, says more: a paragraph after the summary.
	details string
	// example is one command line or more, one a line.
	example string
	// min and max bound the number of positional arguments; max -1: no
	// bound.
	min, max int
	// flagsFirst ends the flags at the first positional argument: what
	// follows is a command line of its own (mcp inspect).
	flagsFirst bool
	// subs are the subcommands, listed in the help in this order.
	subs []*usage
}

// title is "toolhost NAME".
func (u *usage) title() string { return strings.TrimSpace("toolhost " + u.name) }

// sub is the subcommand named word, or nil.
func (u *usage) sub(word string) *usage {
	for _, s := range u.subs {
		if s.word() == word {
			return s
		}
	}
	return nil
}

// word is the last word of the command's name: how its parent calls it.
func (u *usage) word() string { return u.name[strings.LastIndex(u.name, " ")+1:] }

// synopsis is the command's usage lines; withFlags says it has flags,
// runnable that it runs itself (not only through a subcommand).
func (u *usage) synopsis(withFlags, runnable bool) []string {
	var lines []string
	if len(u.subs) > 0 {
		lines = append(lines, u.title()+" COMMAND [flags] [ARGS]")
	}
	if !runnable {
		return lines
	}
	flags := ""
	if withFlags {
		flags = " [flags]"
	}
	for _, alt := range strings.Split(u.args, "\n") {
		lines = append(lines, strings.TrimSpace(u.title()+flags+" "+alt))
	}
	return lines
}

// writeSynopsis writes "usage: " and the synopsis lines.
func writeSynopsis(w io.Writer, lines []string) {
	for i, l := range lines {
		prefix := "usage: "
		if i > 0 {
			prefix = "       "
		}
		fmt.Fprintln(w, prefix+l)
	}
}

// help writes the command's help: its synopsis, summary, details, its
// subcommands, its flags (fs; nil for a command that runs only through
// its subcommands) and its example.
func (u *usage) help(w io.Writer, fs *flag.FlagSet) {
	withFlags := false
	if fs != nil {
		fs.VisitAll(func(*flag.Flag) { withFlags = true })
	}
	writeSynopsis(w, u.synopsis(withFlags, fs != nil || len(u.subs) == 0))
	fmt.Fprintf(w, "\n%s\n", u.summary)
	if u.details != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(u.details, "\n"))
	}
	if len(u.subs) > 0 {
		fmt.Fprintln(w, "\ncommands:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		u.listCommands(tw, u.name == "")
		_ = tw.Flush()
	}
	if withFlags {
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	fmt.Fprintln(w, "\nexample:")
	for _, line := range strings.Split(strings.TrimRight(u.example, "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if len(u.subs) > 0 {
		fmt.Fprintf(w, "\nRun '%s COMMAND -h' for a command's flags and an example.\n", u.title())
	}
}

// listCommands writes a line for each subcommand: its name and summary;
// deep also lists the subcommands of subcommands (toolhost's own help, so
// that every command shows there).
func (u *usage) listCommands(w io.Writer, deep bool) {
	for _, s := range u.subs {
		fmt.Fprintf(w, "  %s\t%s\n", s.word(), s.summary)
		if deep {
			for _, ss := range s.subs {
				fmt.Fprintf(w, "  %s %s\t%s\n", s.word(), ss.word(), ss.summary)
			}
		}
	}
}

// fail writes a usage error on w: the message, the synopsis (and the
// subcommands' names, for a command that has them) and where its help
// is. It returns exit status 2.
func (u *usage) fail(w io.Writer, withFlags, runnable bool, format string, a ...any) int {
	fmt.Fprintf(w, "%s: %s\n", u.title(), fmt.Sprintf(format, a...))
	writeSynopsis(w, u.synopsis(withFlags, runnable))
	if len(u.subs) > 0 {
		words := make([]string, len(u.subs))
		for i, s := range u.subs {
			words[i] = s.word()
		}
		fmt.Fprintf(w, "commands: %s\n", strings.Join(words, ", "))
	}
	fmt.Fprintf(w, "Run '%s -h' for help.\n", u.title())
	return 2
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "--h"
}

// flags is a command's flag set and, once parsed, its positional
// arguments. Its Args, NArg and Arg are the positional arguments wherever
// they stood among the flags.
type flags struct {
	*flag.FlagSet
	u              *usage
	stdout, stderr io.Writer
	args           []string
}

// newFlags makes the flag set of the command u; its help goes to stdout,
// its usage errors to stderr.
func newFlags(u *usage, stdout, stderr io.Writer) *flags {
	fs := flag.NewFlagSet(u.title(), flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse says what is wrong, once
	fs.Usage = func() {}
	return &flags{FlagSet: fs, u: u, stdout: stdout, stderr: stderr}
}

// parse parses args: flags may come before or after the positional
// arguments (unless the command's flags come first), and "--" makes the
// rest positional. It reports false when the command must not run, with
// its exit status: 0 after printing the help (-h, --help) on stdout, 2
// after a usage error on stderr.
func (f *flags) parse(args []string) (int, bool) {
	flagArgs, pos, dashed := f.split(args)
	if err := f.FlagSet.Parse(flagArgs); errors.Is(err, flag.ErrHelp) {
		f.u.help(f.stdout, f.FlagSet)
		return 0, false
	} else if err != nil {
		return f.fail("%v", err), false
	}
	f.args = pos
	if f.u.flagsFirst && !dashed {
		for _, a := range pos[min(1, len(pos)):] {
			if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && f.Lookup(name) != nil {
				return f.fail(`%s after the command is the command's own: %s's flags go before the command (or put "--" before a command that takes %s itself)`, a, f.u.title(), a), false
			}
		}
	}
	if n := len(pos); n < f.u.min || f.u.max >= 0 && n > f.u.max {
		return f.fail("got %d %s, want %s", n, plural(n, "argument"), f.want()), false
	}
	return 0, true
}

// split sorts args into flags (with their values) and positional
// arguments, as flag.FlagSet.Parse reads them: a flag that is not boolean
// takes the next argument as its value unless it has "=value". dashed
// says a "--" ended the flags.
func (f *flags) split(args []string) (flagArgs, pos []string, dashed bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return flagArgs, append(pos, args[i+1:]...), true
		case len(a) < 2 || a[0] != '-':
			if f.u.flagsFirst {
				return flagArgs, append(pos, args[i:]...), false
			}
			pos = append(pos, a)
		default:
			flagArgs = append(flagArgs, a)
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") || i+1 == len(args) {
				continue
			}
			if fl := f.Lookup(name); fl != nil && !isBoolFlag(fl) {
				i++
				flagArgs = append(flagArgs, args[i])
			}
		}
	}
	return flagArgs, pos, false
}

// isBoolFlag reports whether fl takes no value.
func isBoolFlag(fl *flag.Flag) bool {
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// want says how many positional arguments the command takes.
func (f *flags) want() string {
	u := f.u
	switch {
	case u.max == 0:
		return "none"
	case u.max < 0:
		return fmt.Sprintf("at least %d", u.min)
	case u.min == u.max:
		return fmt.Sprint(u.min)
	case u.max == u.min+1:
		return fmt.Sprintf("%d or %d", u.min, u.max)
	}
	return fmt.Sprintf("%d to %d", u.min, u.max)
}

// fail writes a usage error of the command on stderr and returns exit
// status 2.
func (f *flags) fail(format string, a ...any) int {
	withFlags := false
	f.VisitAll(func(*flag.Flag) { withFlags = true })
	return f.u.fail(f.stderr, withFlags, true, format, a...)
}

// Args are the positional arguments.
func (f *flags) Args() []string { return f.args }

// NArg is the number of positional arguments.
func (f *flags) NArg() int { return len(f.args) }

// Arg is the i-th positional argument, "" past the last.
func (f *flags) Arg(i int) string {
	if i < len(f.args) {
		return f.args[i]
	}
	return ""
}

// plural is word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// dispatch runs the command args name under u: a subcommand of u, "help"
// (toolhost help COMMAND, toolhost roles help create), or u's own
// handler. A command without a handler of its own prints its help for -h
// and a usage error otherwise.
func dispatch(u *usage, args []string, stdout, stderr io.Writer) int {
	if len(u.subs) > 0 && len(args) > 0 {
		if args[0] == "help" {
			if len(args) > 1 && isHelp(args[1]) {
				helpUsage.help(stdout, nil)
				return 0
			}
			return dispatch(u, append(slices.Clone(args[1:]), "-h"), stdout, stderr)
		}
		if s := u.sub(args[0]); s != nil {
			return dispatch(s, args[1:], stdout, stderr)
		}
	}
	if h := handlers[u]; h != nil {
		return h(args, stdout, stderr)
	}
	switch {
	case len(args) == 0:
		return u.fail(stderr, false, false, "missing command")
	case isHelp(args[0]):
		u.help(stdout, nil)
		return 0
	}
	return u.fail(stderr, false, false, "unknown command %q", args[0])
}
