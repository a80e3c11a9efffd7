package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolhost/toolhost/internal/procstat"
)

// pgCluster is the PostgreSQL server of -pg-dsn, on which the bench creates
// a fresh database for each of its uses (scripts/bench starts a throwaway
// one with scripts/dev-postgres).
type pgCluster struct {
	base *url.URL // the DSN given, whose path names the database the bench connects to to create its own
	dbs  []string // the databases created, dropped by Close
	// About is the server's version and the settings that bear on writes,
	// for the report: "PostgreSQL 15.8, fsync off, synchronous_commit off,
	// its data on tmpfs".
	About string
	// postmaster is the server's pid when it runs on this machine and its
	// postmaster.pid is readable; 0 otherwise (then cpu is not known).
	postmaster int
}

// newPGCluster connects to dsn, a postgres:// URL, to check it and describe
// the server.
func newPGCluster(ctx context.Context, dsn string) (*pgCluster, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("-pg-dsn %q: want a postgres:// URL", dsn)
	}
	c := &pgCluster{base: u}
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	var version, fsync, syncCommit string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit')`).
		Scan(&version, &fsync, &syncCommit); err != nil {
		return nil, fmt.Errorf("-pg-dsn: %w", err)
	}
	c.About = fmt.Sprintf("PostgreSQL %s, fsync %s, synchronous_commit %s", version, fsync, syncCommit)
	// Where its data is, when the server is on this machine and tells
	// (superusers only).
	var dataDir string
	if h := u.Hostname(); h == "127.0.0.1" || h == "localhost" || h == "::1" {
		if conn.QueryRow(ctx, `SELECT current_setting('data_directory')`).Scan(&dataDir) == nil {
			if fs := fsType(dataDir); fs != "" {
				c.About += ", its data on " + fs
			}
			if b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid")); err == nil {
				first, _, _ := strings.Cut(string(b), "\n")
				if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && procCPU(pid, false) >= 0 {
					c.postmaster = pid
				}
			}
		}
	}
	return c, nil
}

// connect opens a connection to the database of the DSN given.
func (c *pgCluster) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.base.String())
	if err != nil {
		return nil, fmt.Errorf("-pg-dsn: %w", err)
	}
	return conn, nil
}

// createDB creates a fresh, empty database, bench_<pid>_<n>, and returns
// its DSN: the DSN given with its path swapped.
func (c *pgCluster) createDB(ctx context.Context) (string, error) {
	name := fmt.Sprintf("bench_%d_%d", os.Getpid(), len(c.dbs)+1)
	conn, err := c.connect(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	c.dbs = append(c.dbs, name)
	u := *c.base
	u.Path, u.RawPath = "/"+name, ""
	return u.String(), nil
}

// execDSN runs sql, one or more statements, on the database of dsn.
func execDSN(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// Close drops the databases created, with their connections.
func (c *pgCluster) Close() {
	if len(c.dbs) == 0 {
		return
	}
	ctx := context.Background()
	conn, err := c.connect(ctx)
	if err != nil {
		logf("bench: dropping the databases %s: %v", strings.Join(c.dbs, ", "), err)
		return
	}
	defer conn.Close(ctx)
	for _, name := range c.dbs {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			logf("bench: drop database %s: %v", name, err)
		}
	}
	c.dbs = nil
}

// cpu returns the CPU time the server's processes have used: the
// postmaster's, its live children's (the backends, the WAL writer…) and
// its exited children's; -1 when not known.
func (c *pgCluster) cpu() time.Duration {
	if c == nil || c.postmaster == 0 {
		return -1
	}
	total := procCPU(c.postmaster, true)
	if total < 0 {
		return -1
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == c.postmaster {
			continue
		}
		if ppid, cpu := procStat(pid); ppid == c.postmaster && cpu > 0 {
			total += cpu
		}
	}
	return total
}

// clockTick is the unit of the times of /proc/PID/stat (USER_HZ, 100 on
// every Linux port).
const clockTick = 10 * time.Millisecond

// procStat returns a process's parent and the CPU time it has used
// (utime + stime); cpu is -1 when it cannot be read.
func procStat(pid int) (ppid int, cpu time.Duration) {
	f := procstat.Of(pid)
	if len(f) < 15 {
		return 0, -1
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, ticks(f[11]) + ticks(f[12])
}

// procCPU returns the CPU time a process has used, with its waited-for
// children's when children is set; -1 when it cannot be read.
func procCPU(pid int, children bool) time.Duration {
	f := procstat.Of(pid)
	if len(f) < 15 {
		return -1
	}
	cpu := ticks(f[11]) + ticks(f[12])
	if children {
		cpu += ticks(f[13]) + ticks(f[14])
	}
	return cpu
}

func ticks(s string) time.Duration {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Duration(n) * clockTick
}

// fsType names the file system holding path, such as "tmpfs" or "ext4";
// "" when not known.
func fsType(path string) string {
	var st syscall.Statfs_t
	if syscall.Statfs(path, &st) != nil {
		return ""
	}
	switch st.Type {
	case 0x01021994:
		return "tmpfs"
	case 0xef53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683e:
		return "btrfs"
	case 0x794c7630:
		return "overlayfs"
	case 0x2fc12fc1:
		return "zfs"
	}
	return fmt.Sprintf("file system 0x%x", st.Type)
}

// dirOn describes where a directory is: "/tmp (ext4)".
func dirOn(dir string) string {
	if fs := fsType(dir); fs != "" {
		return fmt.Sprintf("%s (%s)", filepath.Clean(dir), fs)
	}
	return filepath.Clean(dir)
}
