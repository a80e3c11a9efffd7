package pgtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolhost/toolhost/internal/procstat"
	"github.com/toolhost/toolhost/internal/proctest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		killedChild()
		return
	}
	Main(m)
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), proctest.Patience) // a cluster just started, on a loaded machine
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestStartGivesFreshEmptyDatabases(t *testing.T) {
	start := time.Now()
	a := Start(t)
	t.Logf("first Start (cluster and database): %v", time.Since(start))
	start = time.Now()
	b := Start(t)
	t.Logf("second Start (database): %v", time.Since(start))
	if a == b {
		t.Fatalf("two Starts gave one DSN: %s", a)
	}
	ctx := context.Background()
	ca, cb := connect(t, a), connect(t, b)
	var version, dbA, dbB string
	if err := ca.QueryRow(ctx, "SELECT version(), current_database()").Scan(&version, &dbA); err != nil {
		t.Fatal(err)
	}
	if err := cb.QueryRow(ctx, "SELECT current_database()").Scan(&dbB); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s; databases %s and %s", version, dbA, dbB)
	if !strings.HasPrefix(version, "PostgreSQL ") || dbA == dbB {
		t.Fatalf("version %q, databases %q and %q", version, dbA, dbB)
	}
	for _, conn := range []*pgx.Conn{ca, cb} {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace").Scan(&n); err != nil || n != 0 {
			t.Fatalf("relations in public: %d, %v", n, err)
		}
	}
	if _, err := ca.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	var found *string
	if err := cb.QueryRow(ctx, "SELECT to_regclass('only_in_a')::text").Scan(&found); err != nil || found != nil {
		t.Fatalf("a's table in b: %v, %v", found, err)
	}
}

func TestDatabaseDroppedAtCleanup(t *testing.T) {
	var name string
	t.Run("user", func(t *testing.T) {
		conn := connect(t, Start(t)) // left open: the drop forces it closed
		if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	conn := connect(t, Shared(t).DSN("postgres"))
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database %s still there: %d, %v", name, n, err)
	}
}

func TestParallelStarts(t *testing.T) {
	Shared(t)
	var mu sync.Mutex
	var total time.Duration
	const n = 8
	t.Run("group", func(t *testing.T) {
		for i := range n {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				start := time.Now()
				dsn := Start(t)
				d := time.Since(start)
				mu.Lock()
				total += d
				mu.Unlock()
				if _, err := connect(t, dsn).Exec(context.Background(), "CREATE TABLE t (x int)"); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
	t.Logf("%d parallel Starts: %v each on average", n, total/n)
}

func TestStopAndStartAgain(t *testing.T) {
	start := time.Now()
	c := New(t)
	t.Logf("New (initdb and start): %v", time.Since(start))
	dsn := c.CreateDB(t)
	ctx := context.Background()
	conn := connect(t, dsn)
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}

	// Under load: a query in flight, ended by the shutdown.
	busy := connect(t, dsn)
	inFlight := make(chan error, 1)
	go func() {
		_, err := busy.Exec(ctx, "SELECT pg_sleep(60)")
		inFlight <- err
	}()
	proctest.Eventually(t, "the query runs", func() bool {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)' AND state = 'active'").Scan(&n)
		return err == nil && n == 1
	})

	start = time.Now()
	c.Stop()
	t.Logf("Stop: %v", time.Since(start))
	select {
	case err := <-inFlight:
		if err == nil {
			t.Fatal("the query in flight survived Stop")
		}
		t.Logf("query in flight: %v", err)
	case <-time.After(proctest.Patience):
		t.Fatal("the query in flight still runs after Stop")
	}
	c.Stop() // stopping a stopped cluster does nothing
	if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("query on a stopped cluster worked")
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(cctx, dsn); err == nil {
		conn.Close(ctx)
		t.Fatal("connected to a stopped cluster")
	}

	start = time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Start again: %v", time.Since(start))
	if err := c.Start(); err != nil { // starting a running cluster does nothing
		t.Fatal(err)
	}
	if got := c.DSN("x"); !strings.Contains(got, "127.0.0.1:"+strconv.Itoa(c.port)+"/") {
		t.Fatalf("DSN %s", got)
	}
	var x int
	if err := connect(t, dsn).QueryRow(ctx, "SELECT x FROM kept").Scan(&x); err != nil || x != 42 {
		t.Fatalf("after restart: %d, %v", x, err)
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	var dir string
	var pid int
	t.Run("user", func(t *testing.T) {
		c := New(t)
		dir, pid = c.dir, c.pg.Process.Pid
	})
	if proctest.Alive(pid) {
		t.Errorf("postgres %d still runs", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", dir, err)
	}
}

// childEnv makes the test binary a child for TestKilledBinaryLeavesNothing.
const childEnv = "PGTEST_KILLED_CHILD"

// killedChild starts the shared cluster, connects to it, prints the
// cluster's directory and the pids of postgres and its children, and waits
// to be killed.
func killedChild() {
	var dsn string
	// A testing.TB outside a test: Shared and Start only need Helper,
	// Fatalf, Cleanup and Name, and Fatalf here is the end.
	t := &childTB{}
	dsn = Start(t)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		fmt.Println("PGTEST-CHILD error", err)
		os.Exit(1)
	}
	defer conn.Close(context.Background())
	pids := []int{shared.pg.Process.Pid}
	pids = append(pids, procstat.Descendants(pids[0])...)
	fmt.Println("PGTEST-CHILD", shared.dir, strings.Trim(fmt.Sprint(pids), "[]"))
	time.Sleep(time.Minute)
	os.Exit(1)
}

type childTB struct{ testing.TB }

func (*childTB) Helper()        {}
func (*childTB) Name() string   { return "child" }
func (*childTB) Cleanup(func()) {}
func (*childTB) Fatalf(f string, a ...any) {
	fmt.Printf("PGTEST-CHILD error "+f+"\n", a...)
	os.Exit(1)
}

func TestKilledBinaryLeavesNothing(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=1")
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if strings.HasPrefix(s.Text(), "PGTEST-CHILD ") {
				line <- s.Text()
			}
		}
		close(line) // EOF: no process but the child held its stdout
	}()
	var fields []string
	select {
	case l := <-line:
		fields = strings.Fields(strings.TrimPrefix(l, "PGTEST-CHILD "))
	case <-time.After(time.Minute):
		child.Process.Kill()
		t.Fatal("child said nothing")
	}
	if fields[0] == "error" {
		child.Wait()
		t.Fatal(strings.Join(fields, " "))
	}
	dir := fields[0]
	var pids []int
	for _, f := range fields[1:] {
		pid, _ := strconv.Atoi(f)
		pids = append(pids, pid)
	}
	t.Logf("child's cluster in %s, postgres and its children: %v", dir, pids)
	if len(pids) < 3 {
		t.Fatalf("expected postgres with children, got %v", pids)
	}

	child.Process.Kill() // SIGKILL: no Cleanup, no Main
	child.Wait()
	start := time.Now()
	for {
		alive := 0
		for _, pid := range pids {
			if proctest.Alive(pid) {
				alive++
			}
		}
		_, err := os.Stat(dir)
		if alive == 0 && os.IsNotExist(err) {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("30s after SIGKILL: %d of %v alive, %s: %v", alive, pids, dir, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("postgres gone and %s removed %v after SIGKILL", dir, time.Since(start))
	select {
	case _, ok := <-line:
		if ok {
			t.Fatal("more from the child")
		}
	case <-time.After(proctest.Patience):
		t.Fatal("the child's stdout is still open: something it started holds it")
	}
}

func TestFindBin(t *testing.T) {
	t.Setenv(BinEnv, t.TempDir())
	if _, err := findBin(); err == nil || !strings.Contains(err.Error(), BinEnv) {
		t.Fatalf("empty %s: %v", BinEnv, err)
	}
	t.Setenv(BinEnv, "")
	t.Setenv("PATH", t.TempDir())
	dir, err := findBin()
	if matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(matches) == 0 {
		if err == nil || !strings.Contains(err.Error(), "scripts/test") {
			t.Fatalf("nothing installed: %q, %v", dir, err)
		}
	} else if err != nil || !strings.HasPrefix(dir, "/usr/lib/postgresql/") {
		t.Fatalf("from /usr/lib/postgresql: %q, %v", dir, err)
	}
	if got := newest([]string{"/p/9.6/bin", "/p/15/bin", "/p/13/bin", "/p/10/bin"}); got != "/p/15/bin" {
		t.Fatalf("newest: %s", got)
	}
}

func TestDBName(t *testing.T) {
	if got := dbName(7, "TestX/sub-Case"); got != "t7_testx_sub_case" {
		t.Fatal(got)
	}
	if got := dbName(123, strings.Repeat("a", 100)); len(got) != 63 {
		t.Fatalf("%d bytes: %s", len(got), got)
	}
}
