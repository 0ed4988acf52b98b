//go:build unix

package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/uumhq/uum/internal/testkit/freeport"
)

// serverStart bounds a server's start; a busy 2-core machine can be slow.
const serverStart = 60 * time.Second

// The lines that say a server accepts connections.
const (
	redisReady    = "Ready to accept connections"
	postgresReady = "database system is ready to accept connections"
)

// Redis fsync policies of the append-only file.
const (
	// FsyncAlways acknowledges a write only once it is on disk: a kill -9
	// loses nothing acknowledged.
	FsyncAlways = "always"
	// FsyncEverysec is Redis's default with AOF: up to about a second of
	// acknowledged writes can be lost with the server.
	FsyncEverysec = "everysec"
)

// redisServer is the harness's own redis-server with the append-only file
// on, killed with SIGKILL and restarted on the same port and folder.
type redisServer struct {
	path, dir, logPath string
	port               int

	mu     sync.Mutex
	fsync  string // of the running server and the next start
	proc   *proc  // nil while killed
	killed []time.Time
}

// startRedis starts redis-server (path) on a free loopback port with its
// files in dir.
func startRedis(ctx context.Context, path, dir string) (*redisServer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("redis folder: %w", err)
	}
	r := &redisServer{path: path, dir: dir, logPath: filepath.Join(dir, "redis.log"), fsync: FsyncAlways}
	var errs []error
	for range 5 { // a free port can be taken before the server binds it
		port, err := freeport.TCP()
		if err == nil {
			r.port = port
			if err = r.start(ctx); err == nil {
				return r, nil
			}
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("start redis-server: %w", errors.Join(errs...))
}

// addr is the server's host:port.
func (r *redisServer) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// start starts the server unless it runs, replaying its append-only file,
// and returns once it accepts connections.
func (r *redisServer) start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		return nil
	}
	args := []string{
		"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--daemonize", "no", "--logfile", "", "--save", "",
		"--appendonly", "yes", "--appendfsync", r.fsync,
		"--maxmemory-policy", "noeviction",
	}
	p, err := spawn(r.path, args, nil, r.logPath, nil, redisReady)
	if err != nil {
		return err
	}
	if err := waitLine(ctx, p, redisReady); err != nil {
		p.kill()
		return fmt.Errorf("redis-server on port %d: %w", r.port, err)
	}
	r.proc = p
	return nil
}

// kill stops the server with SIGKILL, as a crash would, and waits for
// it; false if it was not running.
func (r *redisServer) kill() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return false
	}
	r.proc.kill()
	r.proc = nil
	r.killed = append(r.killed, time.Now())
	return true
}

// freeze stops the server (SIGSTOP) for d, as a long pause of its host
// would, then resumes it; false if it was not running.
func (r *redisServer) freeze(ctx context.Context, d time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil || !r.proc.signal(syscall.SIGSTOP) {
		return false
	}
	_ = sleep(ctx, d) // cancelled: resume at once
	r.proc.signal(syscall.SIGCONT)
	return true
}

// setFsync makes later starts use policy; the caller sets the running
// server's with CONFIG SET.
func (r *redisServer) setFsync(policy string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fsync = policy
}

// kills returns the times the server was killed since since.
func (r *redisServer) kills(since time.Time) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(r.killed), func(t time.Time) bool { return t.Before(since) })
}

// stop shuts the server down for good.
func (r *redisServer) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		r.proc.terminate(10 * time.Second)
		r.proc = nil
	}
}

// postgresCluster is the harness's own Postgres cluster, made with initdb
// in a folder of its own and listening on a free loopback port only. The
// postmaster is the harness's child (not daemonized by pg_ctl), so it
// dies with the harness.
type postgresCluster struct {
	bin, dir, logPath string
	port              int
	// cred runs the server as the postgres user when the harness is root:
	// initdb and postgres refuse to run as root.
	cred *syscall.Credential

	mu   sync.Mutex
	proc *proc // nil while stopped
}

// startPostgres makes a cluster in dir with the binaries of bin (the
// folder holding initdb and postgres) and starts it.
func startPostgres(ctx context.Context, bin, dir string) (*postgresCluster, error) {
	p := &postgresCluster{bin: bin, dir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "postgres.log")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("postgres folder: %w", err)
	}
	if os.Geteuid() == 0 {
		cred, err := postgresUser()
		if err != nil {
			return nil, err
		}
		p.cred = cred
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("postgres folder: %w", err)
		}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", p.dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync")
	initdb.Dir = "/"
	initdb.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb %s: %w: %s", p.dir, err, tail(out))
	}
	port, err := freeport.TCP()
	if err != nil {
		return nil, err
	}
	p.port = port
	// fsync and synchronous_commit stay on: an immediate stop must lose
	// nothing committed.
	conf := fmt.Sprintf("\n# chaos\nport = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n"+
		"max_connections = 300\nshared_buffers = 32MB\nfsync = on\nsynchronous_commit = on\n"+
		// Crash recovery syncs the data folder first: syncfs is one call
		// instead of one per file.
		"recovery_init_sync_method = syncfs\n", port)
	f, err := os.OpenFile(filepath.Join(p.dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("postgresql.conf: %w", err)
	}
	_, werr := f.WriteString(conf)
	if err := errors.Join(werr, f.Close()); err != nil {
		return nil, fmt.Errorf("postgresql.conf: %w", err)
	}
	return p, p.start(ctx)
}

// postgresUser returns the credentials of the postgres user.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and initdb refuses root: no postgres user to run the cluster as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("postgres user: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// url is the URL of database db.
func (p *postgresCluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// start starts the server unless it runs, and returns once it accepts
// connections (after crash recovery, if it crashed).
func (p *postgresCluster) start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		return nil
	}
	pr, err := spawn(filepath.Join(p.bin, "postgres"), []string{"-D", p.dir}, nil, p.logPath, p.cred, postgresReady)
	if err != nil {
		return err
	}
	if err := waitLine(ctx, pr, postgresReady); err != nil {
		pr.kill()
		return fmt.Errorf("postgres on port %d: %w", p.port, err)
	}
	p.proc = pr
	return nil
}

// crash is pg_ctl stop -m immediate: SIGQUIT to the postmaster, which
// kills every backend at once without a checkpoint; the next start runs
// crash recovery from the WAL. False if it was not running.
func (p *postgresCluster) crash() bool {
	return p.halt(syscall.SIGQUIT)
}

// stop is pg_ctl stop -m fast: SIGINT, a clean shutdown.
func (p *postgresCluster) stop() bool {
	return p.halt(syscall.SIGINT)
}

func (p *postgresCluster) halt(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil {
		return false
	}
	p.proc.signal(sig)
	timer := time.NewTimer(serverStart)
	defer timer.Stop()
	select {
	case <-p.proc.done:
	case <-timer.C:
		p.proc.kill()
	}
	p.proc = nil
	return true
}

// FindPostgres returns the folder of initdb and postgres: that of initdb
// on PATH, else the newest of Debian's /usr/lib/postgresql/*/bin.
func FindPostgres() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if p, err = filepath.EvalSymlinks(p); err == nil {
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), "postgres")); err == nil {
				return filepath.Dir(p), nil
			}
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no initdb and postgres on PATH or in /usr/lib/postgresql/*/bin: install the postgresql package or pass -pg-bin")
}

// version is N of /usr/lib/postgresql/N/bin, 0 if it is not a number.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// tail returns the end of a command's output, for an error message.
func tail(out []byte) string {
	s := strings.TrimSpace(string(out))
	if len(s) > 800 {
		s = "…" + s[len(s)-800:]
	}
	return s
}
