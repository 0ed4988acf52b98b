package dbtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// ServerCPU returns the CPU time the Postgres server of pool has used:
// its postmaster's, that of the backends it has reaped, and that of those
// still running. ok is false when the server is not a process this one can
// read in /proc (another host, a container): then benchmarks leave
// Postgres's CPU out. On a server of the benchmark's own it is what the
// benchmark made Postgres do; on a shared one, others' work too.
func ServerCPU(tb testing.TB, pool *pgxpool.Pool) (cpu time.Duration, ok bool) {
	tb.Helper()
	var backend int
	if err := pool.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		tb.Fatal(err)
	}
	st, err := procStat(backend)
	if err != nil {
		return 0, false
	}
	post := st[1] // ppid
	pst, err := procStat(int(post))
	if err != nil {
		return 0, false
	}
	// utime, stime, cutime, cstime of the postmaster.
	ticks := pst[11] + pst[12] + pst[13] + pst[14]
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if st, err := procStat(pid); err == nil && st[1] == post {
			ticks += st[11] + st[12]
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}

// procStat returns the numeric fields of /proc/<pid>/stat after the
// command's name, numbered from the state field (0): 1 is the parent's
// pid, 11 and 12 utime and stime, 13 and 14 the reaped children's.
func procStat(pid int) ([]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 15 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	out := make([]int64, 15)
	for j := 1; j < 15; j++ {
		out[j], _ = strconv.ParseInt(fields[j], 10, 64)
	}
	return out, nil
}
