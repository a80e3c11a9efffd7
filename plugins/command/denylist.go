package main

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// denylist refuses commands that are obviously destructive: a speed bump in
// front of the sandbox, never the defence. It
// parses the command line the way bash splits it — quotes, separators
// (; & | newlines), subshells and command substitutions — and judges each
// simple command by its program and arguments, so spellings such as
// `/bin/rm -r -f /`, `sudo rm -fr /*` or `x; 'rm' -rf ~` are caught. Extra
// patterns from the config are matched against the whole command line.
type denylist struct {
	defaults bool
	extra    []*regexp.Regexp
}

var (
	// forkBomb is f(){ f|f& }: a function piping itself into itself in the
	// background (the three names are compared in code: RE2 has no
	// backreferences).
	forkBomb = regexp.MustCompile(`(\S+)\s*\(\)\s*\{\s*(\S+)\s*\|\s*(\S+)\s*&\s*;?\s*\}`)
	// deviceWrite catches a redirection onto a disk device.
	deviceWrite = regexp.MustCompile(`>\s*/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|loop)`)
	diskDevice  = regexp.MustCompile(`^/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|loop)`)
)

// systemDirs are the top-level directories a recursive rm may not target.
var systemDirs = []string{"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/usr", "/var"}

// wrappers run the command that follows them.
var wrappers = []string{"{", "!", "sudo", "doas", "env", "command", "exec", "nohup", "nice", "time", "timeout", "xargs", "builtin"}

// check returns why cmd is refused, or "" when it is not.
func (d *denylist) check(cmd string) string {
	for _, re := range d.extra {
		if re.MatchString(cmd) {
			return fmt.Sprintf("it matches the denylist pattern %q", re.String())
		}
	}
	if !d.defaults {
		return ""
	}
	for _, m := range forkBomb.FindAllStringSubmatch(cmd, -1) {
		if m[1] == m[2] && m[2] == m[3] {
			return "it is a fork bomb"
		}
	}
	if deviceWrite.MatchString(cmd) {
		return "it writes onto a disk device"
	}
	for _, words := range simpleCommands(cmd) {
		if why := judge(words); why != "" {
			return why
		}
	}
	return ""
}

// judge decides one simple command: its words, quotes removed.
func judge(words []string) string {
	for len(words) > 0 && (slices.Contains(wrappers, path.Base(words[0])) || strings.Contains(words[0], "=") || strings.HasPrefix(words[0], "-")) {
		words = words[1:] // sudo, env VAR=x, timeout 5, their flags…
	}
	if len(words) == 0 {
		return ""
	}
	prog, args := path.Base(words[0]), words[1:]
	switch {
	case prog == "rm" && recursive(args) && slices.ContainsFunc(args, protected):
		return "it removes a system directory or the home directory recursively"
	case prog == "rm" && slices.Contains(args, "--no-preserve-root"):
		return "it removes / (--no-preserve-root)"
	case strings.HasPrefix(prog, "mkfs") || slices.Contains([]string{"mke2fs", "mkswap", "wipefs"}, prog):
		return "it formats a filesystem (" + prog + ")"
	case prog == "dd" && slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "of=") && diskDevice.MatchString(a[3:]) }):
		return "it writes onto a disk device with dd"
	case slices.Contains([]string{"shutdown", "reboot", "poweroff", "halt"}, prog):
		return "it shuts the machine down (" + prog + ")"
	case (prog == "init" || prog == "telinit") && len(args) > 0 && (args[0] == "0" || args[0] == "6"):
		return "it shuts the machine down (" + prog + " " + args[0] + ")"
	case prog == "systemctl" && slices.ContainsFunc(args, func(a string) bool {
		return slices.Contains([]string{"poweroff", "reboot", "halt", "kexec", "suspend", "hibernate"}, a)
	}):
		return "it shuts the machine down (systemctl)"
	case (prog == "chmod" || prog == "chown") && recursive(args) && slices.Contains(args, "/"):
		return "it changes the permissions of / recursively"
	}
	return ""
}

// recursive reports whether rm/chmod/chown arguments ask for recursion.
func recursive(args []string) bool {
	for _, a := range args {
		if a == "--recursive" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsAny(a, "rR")) {
			return true
		}
	}
	return false
}

// protected reports whether an rm target is /, a system directory, or home.
func protected(arg string) bool {
	switch arg {
	case "~", "~/", "~/*", "$HOME", "${HOME}", "$HOME/", "${HOME}/", "$HOME/*", "/*", "/.", "/..":
		return true
	}
	if strings.HasPrefix(arg, "-") || !strings.HasPrefix(arg, "/") {
		return false
	}
	clean := path.Clean(strings.TrimSuffix(arg, "*"))
	return slices.Contains(systemDirs, clean)
}

// simpleCommands splits a command line into its simple commands' words, as
// bash would: quotes are removed from words, and ; & | newlines ( ) ` and $(
// end a command when they are not quoted.
func simpleCommands(s string) [][]string {
	var cmds [][]string
	var words []string
	var word strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
			words = nil
		}
	}
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' && i+1 < len(s) {
				i++
				word.WriteByte(s[i])
			} else {
				word.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] != '\n' {
				word.WriteByte(s[i])
				inWord = true
			}
		case strings.IndexByte(";&|\n()`", c) >= 0:
			endCmd()
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			endCmd()
			i++
		case c == ' ' || c == '\t':
			endWord()
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	endCmd()
	return cmds
}
