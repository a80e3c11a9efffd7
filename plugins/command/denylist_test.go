package main

import (
	"regexp"
	"strings"
	"testing"
)

var dangerous = []string{
	"rm -rf /", "rm -fr /*", "rm -r -f /", "rm --recursive --force /", "/bin/rm -rf /", "sudo rm -rf /",
	"'rm' -rf /", `r\m -rf /`, "rm -rf ~", "rm -rf $HOME", "rm -rf ${HOME}", "rm -Rf /etc", "rm -rf /usr/",
	"rm --no-preserve-root -rf /", "env X=1 rm -rf /", "$(rm -rf /)", "`rm -rf /`", "x && rm -rf / || y",
	"mkfs.ext4 /dev/sda1", "mkfs -t ext4 /dev/sdb", "mke2fs /dev/sdb", "wipefs -a /dev/sda",
	"dd if=/dev/zero of=/dev/sda bs=1M", "dd if=/dev/urandom of=/dev/nvme0n1",
	":(){ :|:& };:", "bomb(){ bomb|bomb& }; bomb",
	"shutdown -h now", "reboot", "sudo poweroff", "halt", "init 0", "systemctl reboot",
	"echo x > /dev/sda", "cat img >/dev/mmcblk0", "chmod -R 000 /", "chown -R nobody /",
}

var harmless = []string{
	"ls -la /", "rm -rf ./build", "rm -rf /tmp/work", "rm file.txt", "echo 'rm -rf /'", "grep -r shutdown docs/",
	"dd if=/dev/zero of=./disk.img bs=1M count=1", "echo reboot >> notes.txt", "cat /dev/sda.txt", "mkdir -p a/b",
	"git log --format='%h %s' | head", "find . -name '*.go' | xargs wc -l", "chmod -R 755 ./bin",
}

func TestDenylist(t *testing.T) {
	d := &denylist{defaults: true}
	for _, cmd := range dangerous {
		if d.check(cmd) == "" {
			t.Errorf("not refused: %s", cmd)
		}
	}
	for _, cmd := range harmless {
		if why := d.check(cmd); why != "" {
			t.Errorf("refused %q: %s", cmd, why)
		}
	}
	extra := &denylist{extra: []*regexp.Regexp{regexp.MustCompile(`\bnc\b`)}}
	if extra.check("nc -l 80") == "" || extra.check("rm -rf /") != "" {
		t.Error("extra patterns without the defaults")
	}
}

// FuzzDenylist: the matcher never panics, and a dangerous command stays
// refused whatever plain commands surround it. The surroundings are kept
// free of quotes, escapes, comments and heredocs, which would change what
// bash runs (and so what must be refused).
func FuzzDenylist(f *testing.F) {
	for i, cmd := range harmless {
		f.Add(cmd, harmless[(i+1)%len(harmless)], uint8(i))
	}
	f.Fuzz(func(t *testing.T, before, after string, which uint8) {
		d := &denylist{defaults: true}
		_ = d.check(before + after) // never panics
		clean := func(s string) string {
			return strings.Map(func(r rune) rune {
				if strings.ContainsRune("'\"\\#<`$(){}", r) {
					return ' '
				}
				return r
			}, s)
		}
		cmd := clean(before) + "\n" + dangerous[int(which)%len(dangerous)] + "\n" + clean(after)
		if d.check(cmd) == "" {
			t.Fatalf("not refused: %q", cmd)
		}
	})
}
