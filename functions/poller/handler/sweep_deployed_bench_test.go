package handler_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/memstore"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/topology"
)

// envCMSProcess makes TestCMSProcess serve the test CMS (this test binary
// run again as a separate process by BenchmarkSweepDeployed).
const envCMSProcess = "LOCALEFLOW_BENCH_CMS_PROCESS"

// TestCMSProcess is not a test: with envCMSProcess set it serves cmstest
// on 127.0.0.1 with the sweep benchmark's latency, prints "url <base URL>"
// and serves until its standard input closes. Every change asked for is
// known (registered on its first request, answered "processing"), so the
// parent needs no channel to register changes.
func TestCMSProcess(t *testing.T) {
	if os.Getenv(envCMSProcess) != "1" {
		t.Skip("helper process of BenchmarkSweepDeployed")
	}
	fake := cmstest.New(testKey)
	fake.SetLatency(cmsLatency)
	var mu sync.Mutex
	known := map[string]bool{}
	lazy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /v1/sites/{site}/changes/{event}/lifecycle
		if parts := strings.Split(r.URL.EscapedPath(), "/"); len(parts) == 7 && core.ValidToken(parts[3]) && core.ValidToken(parts[5]) {
			mu.Lock()
			if !known[parts[5]] {
				known[parts[5]] = true
				fake.Put(cmstest.Change{EventID: parts[5], SiteID: parts[3], PlanID: "plan-" + parts[5], WebsiteVersion: "v1",
					SourceSequence: 1, RequiredLocales: []string{"de-DE"}})
			}
			mu.Unlock()
		}
		fake.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: lazy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("url http://%s\n", ln.Addr())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
	_ = srv.Close()
}

// cmsProcess is the test CMS in a child process.
type cmsProcess struct {
	url string
	pid int
}

// startCMSProcess runs TestCMSProcess of this binary as a separate process
// and stops it when b ends.
func startCMSProcess(b *testing.B) cmsProcess {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestCMSProcess$", "-test.count", "1")
	cmd.Env = append(os.Environ(), envCMSProcess+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "url "); ok {
			go func() { // drain the rest (the test framework's PASS line)
				for sc.Scan() {
				}
			}()
			return cmsProcess{url: u, pid: cmd.Process.Pid}
		}
	}
	b.Fatalf("the CMS process printed no URL: %v", sc.Err())
	return cmsProcess{}
}

// processCPU is the user + system CPU time of this process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pidCPU is the user + system CPU time of process pid from /proc (clock
// ticks of 10 ms); 0 where /proc is missing.
func pidCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces).
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}

// requestTimer adds up the wall time of DynamoDB requests (every attempt
// of an operation, from the Initialize step to its answer).
type requestTimer struct {
	n     atomic.Int64
	total atomic.Int64 // ns
}

func (rt *requestTimer) install(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("localeflowRequestTimer",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			start := time.Now()
			out, meta, err := next.HandleInitialize(ctx, in)
			rt.n.Add(1)
			rt.total.Add(int64(time.Since(start)))
			return out, meta, err
		}), middleware.After)
}

func (rt *requestTimer) reset() { rt.n.Store(0); rt.total.Store(0) }

func (rt *requestTimer) mean() time.Duration {
	if n := rt.n.Load(); n > 0 {
		return time.Duration(rt.total.Load() / n)
	}
	return 0
}

// deployedEnv is the poller's sweep over one store, with the CMS in
// another process: h at the default concurrency, h1 one poll at a time.
type deployedEnv struct {
	clock *clock
	svc   *monitor.Service
	h, h1 *handler.Handler
	timer *requestTimer
	next  int
}

func deployedSetup(b *testing.B, store monitor.Store, cmsURL string) *deployedEnv {
	b.Helper()
	e := &deployedEnv{clock: &clock{now: time.Now().UTC().Truncate(time.Millisecond)}, timer: &requestTimer{}}
	var err error
	// register advances the clock 1 ms: past this sweep grace.
	e.svc, err = monitor.NewService(store, e.clock, nil, monitor.Config{WorkerID: "bench", SweepGrace: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	reader, err := cms.New(cms.Config{BaseURL: cmsURL, Key: testKey, Timeout: 10 * time.Second, Clock: e.clock})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		h *(*handler.Handler)
		n int
	}{{&e.h, 0}, {&e.h1, 1}} {
		*c.h, err = handler.New(handler.Config{Monitor: e.svc, Reader: reader, Clock: e.clock, Concurrency: c.n,
			Queue: delayqueue.New(&fakeSQS{}, "https://sqs.local/poll"), Bus: eventbus.New(&fakeBus{}, "bus")})
		if err != nil {
			b.Fatal(err)
		}
	}
	return e
}

// register registers n new changes (16 at a time) and makes them due.
func (e *deployedEnv) register(b *testing.B, n int) {
	b.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for range n {
		id := fmt.Sprintf("evt-deployed-%06d", e.next)
		e.next++
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			registerDirect(b, e.svc, id, "site-bench", 1)
		}()
	}
	wg.Wait()
	// Due at registration; earlier rounds' changes stay within their poll
	// interval however many rounds run.
	e.clock.Advance(time.Millisecond)
}

// openMonitorDB opens a fresh monitor table on DynamoDB Local, its
// requests timed by rt; idle > 0 sets the HTTP transport's idle
// connections per host (0: the SDK's default, as the functions use).
func openMonitorDB(b *testing.B, rt *requestTimer, idle int) monitor.Store {
	localtest.Require(b)
	_, spec := localtest.Table(b, func(t topology.Topology) topology.Table { return t.Monitor })
	db := awsclient.DynamoDB(localtest.Config(b), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, rt.install)
		if idle > 0 {
			o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
				t.MaxIdleConns, t.MaxIdleConnsPerHost = idle, idle
			})
		}
	})
	store, err := monitordb.New(db, spec.Name)
	if err != nil {
		b.Fatal(err)
	}
	return store
}

// BenchmarkSweepDeployed measures one scheduled sweep in the shape it is
// deployed: the test CMS (50 ms per answer) in a separate process on
// 127.0.0.1, and the store either the memory store (sub-benchmark
// "memstore") or adapters/monitordb on DynamoDB Local ("monitordb",
// integration-gated), after one uncounted warm-up sweep. Each round
// first sweeps calibrationItems due changes one poll at a time, which
// gives the per-poll latency L1 (CMS answer + store round trips + the
// poller's own work), then sweeps sweepItems at the default concurrency
// C. Reported:
//
//   - items/s of the concurrent sweep (listing included);
//   - ceiling-items/s = C / L1, the rate if C polls were always in flight
//     and none took longer than alone; pct-of-ceiling = items/s ÷ that;
//   - cpu-µs/poll: this process's user + system CPU (getrusage) during the
//     concurrent sweep ÷ polls (the poller, its SDK and the memory store;
//     not the CMS process, not DynamoDB Local);
//   - cms-cpu-µs/poll: the CMS process's CPU (/proc, 10 ms ticks) ÷ polls;
//   - ddb-ms/request (monitordb): mean wall time of a DynamoDB request
//     during the concurrent sweep, next to ddb-ms/request-alone during the
//     one-at-a-time sweep ("monitordb-idle128": the same with 128 idle
//     HTTP connections per host instead of the SDK's 10).
func BenchmarkSweepDeployed(b *testing.B) {
	const (
		sweepItems       = 512
		calibrationItems = 16
	)
	proc := startCMSProcess(b)
	stores := []struct {
		name string
		open func(b *testing.B, e *requestTimer) monitor.Store
	}{
		{"memstore", func(*testing.B, *requestTimer) monitor.Store { return memstore.New() }},
		{"monitordb", func(b *testing.B, rt *requestTimer) monitor.Store { return openMonitorDB(b, rt, 0) }},
		// The SDK's default transport keeps 10 idle connections per
		// host: with 64 polls in flight most requests open a new one.
		{"monitordb-idle128", func(b *testing.B, rt *requestTimer) monitor.Store { return openMonitorDB(b, rt, 128) }},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			timer := &requestTimer{}
			e := deployedSetup(b, st.open(b, timer), proc.url)
			e.timer = timer
			// One uncounted sweep first: DynamoDB Local (a JVM) is slow on
			// the first requests of a fresh stack.
			e.register(b, handler.DefaultConcurrency)
			if res, err := e.h.Sweep(context.Background()); err != nil || res.Polled != handler.DefaultConcurrency {
				b.Fatalf("warm-up sweep %+v: %v", res, err)
			}
			b.Logf("load before: %s", loadAverage())
			var wall, alone, cpu, cmsCPU, ddbAlone, ddbConcurrent time.Duration
			var polls, alonePolls int
			for b.Loop() {
				b.StopTimer()
				e.register(b, calibrationItems)
				e.timer.reset()
				start := time.Now()
				res, err := e.h1.Sweep(context.Background())
				alone += time.Since(start)
				ddbAlone += e.timer.mean()
				if err != nil || res.Polled != calibrationItems || res.Errors != 0 {
					b.Fatalf("one-at-a-time sweep %+v: %v", res, err)
				}
				alonePolls += res.Polled
				e.register(b, sweepItems)
				e.timer.reset()
				cpu0, cms0 := processCPU(b), pidCPU(proc.pid)
				b.StartTimer()
				start = time.Now()
				res, err = e.h.Sweep(context.Background())
				wall += time.Since(start)
				b.StopTimer()
				cpu += processCPU(b) - cpu0
				cmsCPU += pidCPU(proc.pid) - cms0
				ddbConcurrent += e.timer.mean()
				if err != nil || res.Polled != sweepItems || res.Errors != 0 {
					b.Fatalf("sweep %+v: %v", res, err)
				}
				polls += res.Polled
				b.StartTimer()
			}
			rounds := float64(b.N)
			l1 := alone.Seconds() / float64(alonePolls)
			rate := float64(polls) / wall.Seconds()
			ceiling := float64(handler.DefaultConcurrency) / l1
			b.ReportMetric(rate, "items/s")
			b.ReportMetric(l1*1000, "L1-ms")
			b.ReportMetric(ceiling, "ceiling-items/s")
			b.ReportMetric(100*rate/ceiling, "pct-of-ceiling")
			b.ReportMetric(float64(cpu.Microseconds())/float64(polls), "cpu-µs/poll")
			b.ReportMetric(float64(cmsCPU.Microseconds())/float64(polls), "cms-cpu-µs/poll")
			if st.name != "memstore" {
				b.ReportMetric(float64(ddbAlone.Microseconds())/1000/rounds, "ddb-ms/request-alone")
				b.ReportMetric(float64(ddbConcurrent.Microseconds())/1000/rounds, "ddb-ms/request")
			}
			b.Logf("load after: %s", loadAverage())
		})
	}
}
