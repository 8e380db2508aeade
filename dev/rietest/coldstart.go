package rietest

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cold-start measurement settings (`make coldstart` sets them).
const (
	// EnvColdStart enables the cold-start tests ("1").
	EnvColdStart = "LOCALEFLOW_COLDSTART"
	// EnvColdStartRounds is the number of rounds (default 3).
	EnvColdStartRounds = "LOCALEFLOW_COLDSTART_ROUNDS"
	// EnvColdStartStarts is the number of cold starts per round (default 10).
	EnvColdStartStarts = "LOCALEFLOW_COLDSTART_STARTS"
	// EnvColdStartMaxMS is the limit of the median over all starts in ms
	// (default 100).
	EnvColdStartMaxMS = "LOCALEFLOW_COLDSTART_MAX_MS"
)

// Sample is one cold start: a fresh emulator (already listening) receives
// the first invoke, starts the bootstrap (the emulator initialises the
// runtime on the first invoke, as Lambda does on a cold start), and answers.
type Sample struct {
	// Wall is from sending the first invoke to having read its answer:
	// process start, Go runtime and package initialisation, the function's
	// main (configuration, SDK clients), the runtime API handshake and the
	// first invocation, plus the emulator's own work.
	Wall time.Duration
	// CPU is the processor time (user + system) the bootstrap process
	// used up to the first answer, from /proc (10 ms ticks; -1 when not
	// readable): the part of Wall that does not depend on the machine's
	// load.
	CPU time.Duration
	// Warm is the same for a second invoke of the same event right after
	// (the invocation alone, for comparison).
	Warm time.Duration
}

// ColdStart measures one cold start of the bootstrap with payload as the
// first event and env added to the test process's environment. The
// emulator is stopped before it returns; a non-200 answer fails the test.
func (b *Binary) ColdStart(t testing.TB, payload []byte, env ...string) Sample {
	t.Helper()
	port, apiPort := freePort(t), freePort(t)
	logs := filepath.Join(t.TempDir(), "output.log")
	out, err := os.Create(logs)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(b.rie, "--runtime-interface-emulator-address", "127.0.0.1:"+port,
		"--runtime-api-address", "127.0.0.1:"+apiPort, b.path)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start rie: %v", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	// Wait until the emulator listens; its own start is not part of a
	// Lambda cold start.
	deadline := time.Now().Add(invokeWait)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rie did not listen: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := client.Post("http://127.0.0.1:"+port+"/2015-03-31/functions/function/invocations", "application/json", bytes.NewReader(payload))
	if err != nil {
		t.Fatalf("first invoke: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	s := Sample{Wall: time.Since(start), CPU: childCPU(cmd.Process.Pid)}
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first invoke: http %d %v: %s\n%s", resp.StatusCode, err, body, ReadFile(t, logs))
	}
	start = time.Now()
	resp, err = client.Post("http://127.0.0.1:"+port+"/2015-03-31/functions/function/invocations", "application/json", bytes.NewReader(payload))
	if err != nil {
		t.Fatalf("second invoke: %v", err)
	}
	body, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	s.Warm = time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("second invoke: http %d %v: %s\n%s", resp.StatusCode, err, body, ReadFile(t, logs))
	}
	return s
}

// ColdStarts skips unless LOCALEFLOW_COLDSTART is set; otherwise it runs
// one uncounted warm-up start, then rounds × starts cold starts (LOCALEFLOW_COLDSTART_ROUNDS, default 3;
// LOCALEFLOW_COLDSTART_STARTS, default 10), logs per round the median,
// minimum and maximum wall time, the bootstrap's median CPU time to the
// first answer, the median of a warm second invoke and the
// machine load (/proc/loadavg) before and after, and fails
// when the median wall time over all starts exceeds
// LOCALEFLOW_COLDSTART_MAX_MS (default 100).
func (b *Binary) ColdStarts(t testing.TB, name string, payload []byte, env ...string) {
	t.Helper()
	rounds, starts := envInt(t, EnvColdStartRounds, 3), envInt(t, EnvColdStartStarts, 10)
	maxMS := envInt(t, EnvColdStartMaxMS, 100)
	// One start first that is not counted: the local emulators (DynamoDB
	// Local is a JVM) are slow on the first requests of a new shape, which
	// is not part of the function's cold start.
	warmup := b.ColdStart(t, payload, env...)
	t.Logf("coldstart %s warm-up start (not counted): %s", name, ms(warmup.Wall))
	var all []time.Duration
	for r := 1; r <= rounds; r++ {
		load := loadavg()
		var walls, warms, cpus []time.Duration
		for range starts {
			s := b.ColdStart(t, payload, env...)
			walls = append(walls, s.Wall)
			warms = append(warms, s.Warm)
			cpus = append(cpus, s.CPU)
		}
		all = append(all, walls...)
		slices.Sort(walls)
		t.Logf("coldstart %s round %d: n=%d median %s min %s max %s | bootstrap CPU to first answer median %s | warm second invoke median %s | load %s -> %s",
			name, r, len(walls), ms(Median(walls)), ms(walls[0]), ms(walls[len(walls)-1]),
			ms(Median(cpus)), ms(Median(warms)), load, loadavg())
	}
	med := Median(all)
	t.Logf("coldstart %s: median of %d = %s (limit %d ms)", name, len(all), ms(med), maxMS)
	if med > time.Duration(maxMS)*time.Millisecond {
		t.Errorf("coldstart %s: median %s above %d ms", name, ms(med), maxMS)
	}
}

// Median is the median of d (the mean of the middle two for an even
// count); 0 for none.
func Median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(d))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}

func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// loadavg is the 1, 5 and 15 minute load averages ("?" where unknown).
func loadavg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// RequireColdStart skips the test unless LOCALEFLOW_COLDSTART is set.
func RequireColdStart(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvColdStart) == "" {
		t.Skip(EnvColdStart + " is not set (make coldstart sets it)")
	}
}

// childCPU is the user + system time of the emulator's child process (the
// bootstrap), from /proc/<pid>/stat in clock ticks of 10 ms; -1 when it
// cannot be read.
func childCPU(riePID int) time.Duration {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(riePID) + "/task/*/children")
	for _, f := range tasks {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, pid := range strings.Fields(string(raw)) {
			stat, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				continue
			}
			// The command name is in parentheses and may hold spaces; the
			// fields after it start with the state (field 3), so utime
			// (14) and stime (15) are the 12th and 13th.
			i := bytes.LastIndexByte(stat, ')')
			if i < 0 || !bytes.Contains(stat[:i], []byte("(bootstrap")) {
				continue
			}
			f := strings.Fields(string(stat[i+1:]))
			if len(f) < 13 {
				continue
			}
			utime, err1 := strconv.ParseInt(f[11], 10, 64)
			stime, err2 := strconv.ParseInt(f[12], 10, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			return time.Duration(utime+stime) * 10 * time.Millisecond
		}
	}
	return -1
}
