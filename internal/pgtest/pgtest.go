// Package pgtest gives tests a real PostgreSQL: a throwaway cluster in a
// temporary directory that the test binary starts itself, the first time a
// test asks for it, and that listens on 127.0.0.1 (and a Unix socket in that
// directory) only.
//
// [Start] gives a test a fresh, empty database on the binary's shared cluster
// (the first call creates the cluster, about a second; each database costs
// a few tens of milliseconds); [New] gives a test a cluster of its own, for
// tests that stop and start it. A DSN is a URL for pgx (or libpq):
// postgres://postgres@127.0.0.1:PORT/DB?sslmode=disable (trust
// authentication, no password).
//
// A package's TestMain should call [Main], which stops the shared cluster and
// removes its directory once the tests have run. Whatever way the binary
// ends, even SIGKILL, a watchdog process started with each cluster stops
// postgres and removes the directory as soon as the binary is gone: the
// watchdog blocks reading a pipe whose write end only the binary holds, and
// the kernel closes it when the binary dies.
//
// The cluster lives in /dev/shm when that is a tmpfs with 2 GiB free, else
// in the temporary directory. The PostgreSQL binaries are found in
// $TOOLHOST_PG_BIN (scripts/test sets it), else through the initdb on PATH,
// else in the newest /usr/lib/postgresql/*/bin. Run as root, the cluster
// runs as the user nobody, since initdb and postgres refuse to run as root.
package pgtest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolhost/toolhost/internal/proctest"
)

// BinEnv names the environment variable that holds the directory of the
// PostgreSQL binaries (initdb, postgres) to use.
const BinEnv = "TOOLHOST_PG_BIN"

// startTimeout bounds how long postgres may take to accept connections, and
// stopTimeout how long a fast shutdown may take before postgres is told to
// quit at once.
const (
	startTimeout = 60 * time.Second
	stopTimeout  = 30 * time.Second
)

// A Cluster is a throwaway PostgreSQL cluster: a data directory and a
// postgres serving it on 127.0.0.1 at a fixed port, stopped and started
// again as a test needs. Its superuser is postgres, with no password.
type Cluster struct {
	bin  string              // the directory of initdb and postgres
	dir  string              // data/, postgres.log and the Unix socket
	port int                 // on 127.0.0.1, kept across Stop and Start
	cred *syscall.Credential // whom initdb and postgres run as; nil: us
	dogW *os.File            // the watchdog's lifeline: it acts when this closes
	dbs  atomic.Int64        // databases created, for unique names
	mu   sync.Mutex          // guards what follows
	pg   *exec.Cmd           // the running postgres, nil when stopped
	done chan struct{}       // closed when pg has exited
	gone bool                // closed: stopped and removed for good
}

var (
	sharedOnce sync.Once
	shared     *Cluster
	sharedErr  error
)

// Shared returns the test binary's shared cluster, creating and starting it
// the first time. A test that stops it must not run in parallel with other
// tests that use it, and must start it again before it ends; [New] gives a
// test a cluster to stop freely.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = newCluster("") })
	if sharedErr != nil {
		t.Fatalf("pgtest: %v", sharedErr)
	}
	return shared
}

// Start returns the DSN of a fresh, empty database on the shared cluster,
// dropped when t ends.
func Start(t testing.TB) string {
	t.Helper()
	return Shared(t).CreateDB(t)
}

// New returns a started cluster of t's own, stopped and removed when t
// ends.
func New(t testing.TB) *Cluster {
	t.Helper()
	return NewIn(t, "")
}

// NewIn is [New] with the cluster's directory made in base, such as a small
// file system the test mounted, rather than where pgtest chooses (""). Its
// WAL segments are of 1 MiB rather than 16, so that it fits in less: about
// 40 MiB with one database.
func NewIn(t testing.TB, base string) *Cluster {
	t.Helper()
	c, err := newCluster(base)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := c.close(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return c
}

// Main runs the tests, then stops the shared cluster, if any test started
// it, removes its directory and exits. Call it from TestMain. (Without it,
// the watchdog does the same just after the binary exits.)
func Main(m *testing.M) {
	code := m.Run()
	if shared != nil {
		if err := shared.close(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// DSN returns the URL that connects to database db as the superuser, over
// TCP on 127.0.0.1.
func (c *Cluster) DSN(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// CreateDB creates a fresh, empty database, named after t, and returns its
// [Cluster.DSN]. When t ends the database is dropped, with its connections, unless
// the cluster is stopped then.
func (c *Cluster) CreateDB(t testing.TB) string {
	t.Helper()
	name := dbName(c.dbs.Add(1), t.Name())
	if err := c.exec(fmt.Sprintf("CREATE DATABASE %s", pgx.Identifier{name}.Sanitize())); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if !c.running() {
			return
		}
		if err := c.exec(fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{name}.Sanitize())); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return c.DSN(name)
}

// Stop shuts postgres down the way `pg_ctl stop -m fast` does: open
// connections are ended and the data is kept. Stopping a stopped cluster
// does nothing.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stop()
}

// stop stops postgres, if it runs, with c.mu held.
func (c *Cluster) stop() {
	if c.pg == nil {
		return
	}
	c.pg.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(stopTimeout):
		c.pg.Process.Signal(syscall.SIGQUIT)
		<-c.done
	}
	c.pg = nil
}

// Start starts postgres again on the same data and the same port, and
// returns once it accepts connections. Starting a running cluster does
// nothing.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return errors.New("pgtest: cluster removed")
	}
	if c.pg != nil {
		return nil
	}
	return c.start()
}

// running reports whether postgres runs.
func (c *Cluster) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pg != nil
}

// exec runs sql in the postgres database.
func (c *Cluster) exec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// newCluster creates a cluster in a new temporary directory in base (""
// for tempBase), with its watchdog, and starts it.
func newCluster(base string) (*Cluster, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	initArgs := []string{"-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"}
	dir, err := os.MkdirTemp(cmp.Or(base, tempBase()), "pgtest-")
	if base != "" {
		initArgs = append(initArgs, "--wal-segsize=1")
	} else if err != nil {
		dir, err = os.MkdirTemp("", "pgtest-")
	}
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir, cred: cred}
	fail := func(err error) (*Cluster, error) {
		c.close()
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	if err := c.startWatchdog(); err != nil {
		return fail(fmt.Errorf("start watchdog: %v", err))
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), append([]string{"-D", filepath.Join(dir, "data")}, initArgs...)...)
	initdb.Dir, initdb.Env = dir, env()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		hint := ""
		if cred != nil {
			hint = fmt.Sprintf(" (run as root, the cluster runs as uid %d, who must be able to reach %s)", cred.Uid, dir)
		}
		return fail(fmt.Errorf("initdb: %v%s\n%s", err, hint, out))
	}
	// DROP DATABASE ... WITH (FORCE) came with PostgreSQL 13.
	if b, err := os.ReadFile(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		return fail(err)
	} else if v, _ := strconv.Atoi(strings.TrimSpace(string(b))); v < 13 {
		return fail(fmt.Errorf("PostgreSQL %s in %s is too old: pgtest needs 13 or newer", strings.TrimSpace(string(b)), bin))
	}
	// A free port can be taken before postgres binds it: try another.
	for try := 0; ; try++ {
		if c.port, err = proctest.FreePort(); err != nil {
			return fail(err)
		}
		if err = c.start(); err == nil {
			return c, nil
		}
		if try == 2 || !strings.Contains(err.Error(), "could not bind") {
			return fail(err)
		}
	}
}

// start starts postgres and waits until it accepts connections. c.mu is
// held, or c is not yet shared.
func (c *Cluster) start() error {
	logPath := filepath.Join(c.dir, "postgres.log")
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(log, "pgtest: starting postgres on 127.0.0.1:%d at %s\n", c.port, time.Now().Format(time.RFC3339Nano))
	// The Unix socket goes in the directory when its path fits (107 bytes).
	sockets := c.dir
	if len(c.dir)+len("/.s.PGSQL.65535.lock") > 107 {
		sockets = ""
	}
	data := filepath.Join(c.dir, "data")
	pg := exec.Command(filepath.Join(c.bin, "postgres"), "-D", data, "-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+sockets,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	pg.Dir, pg.Env, pg.Stdout, pg.Stderr = c.dir, env(), log, log
	// Its own session: a Ctrl-C meant for go test reaches the test binary,
	// whose end the watchdog handles, not postgres.
	pg.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setsid: true}
	if err := pg.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { pg.Wait(); close(done) }()
	pidFile := filepath.Join(data, "postmaster.pid")
	want := strconv.Itoa(pg.Process.Pid)
	deadline := time.Now().Add(startTimeout)
	for {
		// postmaster.pid: its pid on line 1, "ready" on line 8 once it
		// accepts connections.
		if b, err := os.ReadFile(pidFile); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) >= 8 && lines[0] == want && strings.TrimSpace(lines[7]) == "ready" {
				c.pg, c.done = pg, done
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("postgres exited: %v\n%s", pg.ProcessState, tail(logPath))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			pg.Process.Signal(syscall.SIGQUIT)
			<-done
			return fmt.Errorf("postgres not ready after %v\n%s", startTimeout, tail(logPath))
		}
	}
}

// watchdog is the script that outlives the test binary: it reads its stdin,
// the read end of a pipe only the test binary can write to, until the
// binary ends however it does and the kernel closes the write end; then it
// tells postgres, if it runs, to quit at once (SIGQUIT: immediate shutdown),
// waits for it, and removes the directory ($1).
const watchdog = `
while read -r _; do :; done
f="$1/data/postmaster.pid"
if [ -f "$f" ] && read -r pid <"$f"; then
	kill -QUIT "$pid" 2>/dev/null
	i=0
	while [ -f "$f" ] && kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
	[ -f "$f" ] && kill -KILL "$pid" 2>/dev/null
fi
rm -rf "$1"
`

// startWatchdog starts the watchdog in a session of its own (so no signal
// for the test binary's process group reaches it), as us, with neither our
// stdout nor stderr (go test waits for them to close).
func (c *Cluster) startWatchdog() error {
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return err
	}
	defer r.Close()
	dog := exec.Command("/bin/sh", "-c", watchdog, "pgtest-watchdog", c.dir)
	dog.Stdin = r
	dog.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := dog.Start(); err != nil {
		w.Close()
		return err
	}
	go dog.Wait()
	c.dogW = w
	return nil
}

// close stops the cluster for good, removes its directory and lets its
// watchdog go.
func (c *Cluster) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return nil
	}
	c.gone = true
	c.stop()
	err := os.RemoveAll(c.dir)
	if c.dogW != nil {
		c.dogW.Close()
	}
	return err
}

// findBin returns the directory of initdb and postgres: $TOOLHOST_PG_BIN,
// else that of the initdb on PATH, else the newest /usr/lib/postgresql/*/bin.
func findBin() (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		if !hasBins(dir) {
			return "", fmt.Errorf("%s=%s holds no initdb and postgres", BinEnv, dir)
		}
		return dir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && hasBins(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if hasBins(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	var dirs []string
	for _, f := range found {
		if hasBins(filepath.Dir(f)) {
			dirs = append(dirs, filepath.Dir(f))
		}
	}
	if len(dirs) > 0 {
		return newest(dirs), nil
	}
	return "", fmt.Errorf("no PostgreSQL found (no initdb and postgres in $%s, on PATH or in /usr/lib/postgresql/*/bin): "+
		"run scripts/test, which installs it, or install the postgresql package", BinEnv)
}

// hasBins reports whether dir holds initdb and postgres.
func hasBins(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// newest returns, of directories like /usr/lib/postgresql/VERSION/bin, the
// one of the highest version.
func newest(dirs []string) string {
	version := func(dir string) []int {
		var v []int
		for _, s := range strings.Split(filepath.Base(filepath.Dir(dir)), ".") {
			n, _ := strconv.Atoi(s)
			v = append(v, n)
		}
		return v
	}
	sort.Slice(dirs, func(i, j int) bool {
		a, b := version(dirs[i]), version(dirs[j])
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		return len(a) < len(b)
	})
	return dirs[len(dirs)-1]
}

// tempBase returns where to put a cluster: /dev/shm when it is a tmpfs with
// room to spare (initdb and CREATE DATABASE take a fifth to a half of the
// time they take on a disk, even with fsync off), else the usual temporary
// directory. Docker's default /dev/shm, 64 MiB, is too small.
func tempBase() string {
	const shm, room = "/dev/shm", 2 << 30
	const tmpfsMagic = 0x01021994
	var fs syscall.Statfs_t
	if err := syscall.Statfs(shm, &fs); err == nil && fs.Type == tmpfsMagic && fs.Bavail*uint64(fs.Bsize) >= room {
		return shm
	}
	return os.TempDir()
}

// credential returns whom initdb and postgres run as: nobody when we are
// root, else nil (ourselves).
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	uid, gid := uint32(65534), uint32(65534)
	if u, err := user.Lookup("nobody"); err == nil {
		if n, err := strconv.ParseUint(u.Uid, 10, 32); err == nil {
			uid = uint32(n)
		}
		if n, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
			gid = uint32(n)
		}
	}
	return &syscall.Credential{Uid: uid, Gid: gid}, nil
}

// env returns our environment without the PG* variables, which initdb and
// postgres read (PGDATA, PGPORT, ...).
func env() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			out = append(out, kv)
		}
	}
	return out
}

// dbName returns a database name unique in the cluster, after the test's
// name, within PostgreSQL's 63 bytes.
func dbName(n int64, test string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "t%d_", n)
	for _, r := range strings.ToLower(test) {
		if b.Len() >= 63 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// tail returns the last lines of the file at path.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
