package rietest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	// EnvColdStartWarmup is the number of invokes of the first event on
	// one emulator before the measured starts (default 30), which warm
	// the local emulators, not the function.
	EnvColdStartWarmup = "LOCALEFLOW_COLDSTART_WARMUP"
	// EnvColdStartBaseline, when set, is the root of another checkout of
	// the module (an older commit): the same function package is built
	// from it with the same flags, and its cold starts are measured
	// interleaved with this build's (one of each in turn, same machine
	// load). The limit applies to this build only.
	EnvColdStartBaseline = "LOCALEFLOW_COLDSTART_BASELINE"
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
	// CPU is the processor time the bootstrap process used up to the
	// first answer, summed over its threads from /proc schedstat
	// (nanoseconds; -1 when not readable): the part of Wall that depends
	// least on the machine's load.
	CPU time.Duration
	// Warm is the same for a second invoke of the same event right after
	// (the invocation alone, for comparison).
	Warm time.Duration
	// Init and Invoke split Wall as the emulator reports it (its "INIT
	// REPORT" and the first "INVOKE RTDONE" log lines): the bootstrap's
	// start up to its first request for an event (process start, Go
	// runtime and package initialisation, main), then the first
	// invocation. Wall − Init − Invoke is the emulator's and the
	// harness's own part (process spawn, HTTP hops). -1 when the
	// emulator did not log them.
	Init, Invoke time.Duration
}

// ColdStart measures one cold start of the bootstrap with payload as the
// first event and env added to the test process's environment. The
// emulator is stopped before it returns; a non-200 answer fails the test.
func (b *Binary) ColdStart(t testing.TB, payload []byte, env ...string) Sample {
	t.Helper()
	return b.coldStart(t, payload, 1, env...)
}

// coldStart is ColdStart with warm invokes after the first (at least
// one; Sample.Warm is the first of them).
func (b *Binary) coldStart(t testing.TB, payload []byte, warm int, env ...string) Sample {
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
	for i := range max(warm, 1) {
		start = time.Now()
		resp, err = client.Post("http://127.0.0.1:"+port+"/2015-03-31/functions/function/invocations", "application/json", bytes.NewReader(payload))
		if err != nil {
			t.Fatalf("warm invoke: %v", err)
		}
		body, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if i == 0 {
			s.Warm = time.Since(start)
		}
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("warm invoke: http %d %v: %s\n%s", resp.StatusCode, err, body, ReadFile(t, logs))
		}
	}
	s.Init, s.Invoke = emulatorSplit(ReadFile(t, logs))
	return s
}

var (
	initReport  = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)
	invokeDone  = regexp.MustCompile(`INVOKE RTDONE\([^\n]*duration: ([0-9.]+) ?ms\)`)
	millisecond = float64(time.Millisecond)
)

// emulatorSplit reads the init duration and the first invocation's
// duration from the emulator's log; -1 for one it did not log.
func emulatorSplit(log []byte) (initD, invokeD time.Duration) {
	find := func(re *regexp.Regexp) time.Duration {
		m := re.FindSubmatch(log)
		if m == nil {
			return -1
		}
		f, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			return -1
		}
		return time.Duration(f * millisecond)
	}
	return find(initReport), find(invokeDone)
}

// ColdStarts measures cold starts of the bootstrap (RequireColdStart
// skips the test unless LOCALEFLOW_COLDSTART is set). First it warms the
// local emulators: LOCALEFLOW_COLDSTART_WARMUP (default 30) invokes of
// payload on one emulator, then one uncounted cold start. DynamoDB Local
// is a JVM that compiles its request paths only after many requests; its
// first hundreds of requests are several times slower than later ones,
// and a Lambda function's DynamoDB is never in that state. The function
// itself is not warmed: every measured start is a new process.
//
// Then rounds × starts cold starts (LOCALEFLOW_COLDSTART_ROUNDS, default
// 3; LOCALEFLOW_COLDSTART_STARTS, default 10). Per round it logs the
// median, minimum and maximum wall time, the medians of the emulator's
// init and first-invoke durations, of the bootstrap's CPU time to the
// first answer and of a warm second invoke, and the machine load
// (/proc/loadavg) before and after. With LOCALEFLOW_COLDSTART_BASELINE
// the baseline build's starts alternate with this build's and are logged
// the same way. It fails when the median wall time over all of this
// build's starts exceeds LOCALEFLOW_COLDSTART_MAX_MS (default 100).
func (b *Binary) ColdStarts(t testing.TB, name string, payload []byte, env ...string) {
	t.Helper()
	rounds, starts := envInt(t, EnvColdStartRounds, 3), envInt(t, EnvColdStartStarts, 10)
	maxMS := envInt(t, EnvColdStartMaxMS, 100)
	warmups := envInt(t, EnvColdStartWarmup, 30)
	builds := []struct {
		label string
		bin   *Binary
		all   []Sample
	}{{label: name, bin: b}}
	if root := os.Getenv(EnvColdStartBaseline); root != "" {
		builds = append(builds, struct {
			label string
			bin   *Binary
			all   []Sample
		}{label: name + " baseline", bin: b.baseline(t, root)})
	}
	began := time.Now()
	b.coldStart(t, payload, warmups, env...)
	t.Logf("coldstart %s warm-up: %d invokes on one emulator in %s", name, warmups, ms(time.Since(began)))
	for _, bl := range builds {
		warmup := bl.bin.ColdStart(t, payload, env...)
		t.Logf("coldstart %s warm-up start (not counted): %s", bl.label, ms(warmup.Wall))
	}
	for r := 1; r <= rounds; r++ {
		load := loadavg()
		round := make([][]Sample, len(builds))
		for range starts {
			for i, bl := range builds {
				round[i] = append(round[i], bl.bin.ColdStart(t, payload, env...))
			}
		}
		after := loadavg()
		for i := range builds {
			builds[i].all = append(builds[i].all, round[i]...)
			t.Logf("coldstart %s round %d: %s | load %s -> %s", builds[i].label, r, summary(round[i]), load, after)
		}
	}
	for _, bl := range builds {
		t.Logf("coldstart %s: median of %d = %s (%s)", bl.label, len(bl.all), ms(Median(field(bl.all, func(s Sample) time.Duration { return s.Wall }))), summary(bl.all))
	}
	med := Median(field(builds[0].all, func(s Sample) time.Duration { return s.Wall }))
	t.Logf("coldstart %s: median of %d = %s (limit %d ms)", name, len(builds[0].all), ms(med), maxMS)
	if med > time.Duration(maxMS)*time.Millisecond {
		t.Errorf("coldstart %s: median %s above %d ms", name, ms(med), maxMS)
	}
}

// summary is one line of medians (and the wall range) of samples.
func summary(samples []Sample) string {
	walls := field(samples, func(s Sample) time.Duration { return s.Wall })
	slices.Sort(walls)
	return fmt.Sprintf("n=%d median %s min %s max %s | emulator init median %s first invoke median %s rest (spawn, emulator, HTTP) median %s | bootstrap CPU to first answer median %s | warm second invoke median %s",
		len(walls), ms(Median(walls)), ms(walls[0]), ms(walls[len(walls)-1]),
		ms(Median(field(samples, func(s Sample) time.Duration { return s.Init }))),
		ms(Median(field(samples, func(s Sample) time.Duration { return s.Invoke }))),
		ms(Median(field(samples, func(s Sample) time.Duration {
			if s.Init < 0 || s.Invoke < 0 {
				return -1
			}
			return s.Wall - s.Init - s.Invoke
		}))),
		ms(Median(field(samples, func(s Sample) time.Duration { return s.CPU }))),
		ms(Median(field(samples, func(s Sample) time.Duration { return s.Warm }))))
}

func field(samples []Sample, f func(Sample) time.Duration) []time.Duration {
	out := make([]time.Duration, len(samples))
	for i, s := range samples {
		out[i] = f(s)
	}
	return out
}

// baseline builds the function package of the current directory from the
// checkout at root, with b's build flags.
func (b *Binary) baseline(t testing.TB, root string) *Binary {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	mod := dir
	for {
		if _, err := os.Stat(filepath.Join(mod, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(mod)
		if parent == mod {
			t.Fatalf("no go.mod above %s", dir)
		}
		mod = parent
	}
	rel, err := filepath.Rel(mod, dir)
	if err != nil {
		t.Fatal(err)
	}
	return build(t, b.rie, filepath.Join(root, rel), b.flags...)
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

// childCPU is the processor time of the emulator's child process (the
// bootstrap): the sum over its threads of the first field of
// /proc/<pid>/task/<tid>/schedstat (nanoseconds on a CPU); -1 when it
// cannot be read.
func childCPU(riePID int) time.Duration {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(riePID) + "/task/*/children")
	for _, f := range tasks {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, pid := range strings.Fields(string(raw)) {
			comm, err := os.ReadFile("/proc/" + pid + "/comm")
			if err != nil || !strings.HasPrefix(string(comm), "bootstrap") {
				continue
			}
			if cpu, ok := processCPU(pid); ok {
				return cpu
			}
		}
	}
	return -1
}

// processCPU sums the on-CPU nanoseconds of every thread of pid.
func processCPU(pid string) (time.Duration, bool) {
	stats, _ := filepath.Glob("/proc/" + pid + "/task/*/schedstat")
	var total int64
	for _, f := range stats {
		raw, err := os.ReadFile(f)
		if err != nil {
			return 0, false
		}
		fields := strings.Fields(string(raw))
		if len(fields) == 0 {
			return 0, false
		}
		ns, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, false
		}
		total += ns
	}
	return time.Duration(total), len(stats) > 0
}
