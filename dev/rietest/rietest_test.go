package rietest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBuildSkipsWithoutRIE(t *testing.T) {
	t.Setenv(EnvRIE, "")
	var built bool
	ok := t.Run("inner", func(t *testing.T) {
		Build(t)
		built = true
	})
	if !ok || built {
		t.Fatalf("ok=%v built=%v: Build must skip without %s", ok, built, EnvRIE)
	}
}

// TestStartRunsTheEmulator starts a stand-in emulator (a shell script)
// and checks the command line, the environment and the captured output.
func TestStartRunsTheEmulator(t *testing.T) {
	dir := t.TempDir()
	rie := filepath.Join(dir, "rie")
	script := "#!/bin/sh\necho \"args: $*\"\necho \"env: $RIETEST_SETTING\" >&2\nexec sleep 30\n"
	if err := os.WriteFile(rie, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	fn := (&Binary{rie: rie, path: "/path/to/bootstrap"}).Start(t, "RIETEST_SETTING=on")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(string(fn.Logs(t)), "env: on") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	logs := string(fn.Logs(t))
	if !strings.Contains(logs, "args: --runtime-interface-emulator-address 127.0.0.1:") ||
		!strings.Contains(logs, "--runtime-api-address 127.0.0.1:") || !strings.Contains(logs, " /path/to/bootstrap") ||
		!strings.Contains(logs, "env: on") {
		t.Fatalf("output %q", logs)
	}
	if !strings.HasPrefix(fn.url, "http://127.0.0.1:") || !strings.HasSuffix(fn.url, "/2015-03-31/functions/function/invocations") {
		t.Fatalf("url %q", fn.url)
	}
}

func TestInvokePostsTheEvent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/2015-03-31/functions/function/invocations" {
			http.Error(w, "wrong request", http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, `{"echo":%s}`, body)
	}))
	defer srv.Close()
	f := &Function{url: srv.URL + "/2015-03-31/functions/function/invocations"}
	if got := string(f.Invoke(t, []byte(`{"n":1}`))); got != `{"echo":{"n":1}}` {
		t.Fatalf("response %s", got)
	}
}

func TestReadFile(t *testing.T) {
	if got := string(ReadFile(t, "doc.go")); !strings.Contains(got, "package rietest") {
		t.Fatalf("doc.go reads %q", got)
	}
}

func TestMedian(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	for _, tt := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{ms(7), 7 * time.Millisecond},
		{ms(30, 10, 20), 20 * time.Millisecond},
		{ms(40, 10, 30, 20), 25 * time.Millisecond},
	} {
		if got := Median(tt.in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestColdStartsSkipsWithoutTheSetting(t *testing.T) {
	t.Setenv(EnvColdStart, "")
	var ran bool
	ok := t.Run("inner", func(t *testing.T) {
		RequireColdStart(t)
		ran = true
	})
	if !ok || ran {
		t.Fatalf("ok=%v ran=%v: RequireColdStart must skip without %s", ok, ran, EnvColdStart)
	}
}

// TestEmulatorSplitReadsInitAndFirstInvoke: the cold-start samples split
// the wall time with the emulator's own INIT REPORT and the first INVOKE
// RTDONE (not a later invoke's).
func TestEmulatorSplitReadsInitAndFirstInvoke(t *testing.T) {
	log := []byte("01 Dec 2026 06:19:19,634 [INFO] (rapid) exec '/tmp/bootstrap' (cwd=/x, handler=)\n" +
		"01 Dec 2026 06:19:19,649 [INFO] (rapid) INIT RTDONE(status: success)\n" +
		"01 Dec 2026 06:19:19,649 [INFO] (rapid) INIT REPORT(durationMs: 9.623000)\n" +
		"01 Dec 2026 06:19:19,992 [INFO] (rapid) INVOKE RTDONE(status: success, produced bytes: 0, duration: 343.132000ms)\n" +
		"01 Dec 2026 06:19:20,100 [INFO] (rapid) INVOKE RTDONE(status: success, produced bytes: 0, duration: 50.5ms)\n")
	initD, invokeD := emulatorSplit(log)
	if initD != 9623*time.Microsecond || invokeD != 343132*time.Microsecond {
		t.Fatalf("init %s invoke %s, want 9.623ms 343.132ms", initD, invokeD)
	}
	if initD, invokeD := emulatorSplit([]byte("no report\n")); initD != -1 || invokeD != -1 {
		t.Fatalf("without the lines: init %s invoke %s, want -1 -1", initD, invokeD)
	}
}

// TestProcessCPUCountsEveryThread: the bootstrap's CPU time was read from
// /proc/<pid>/stat in 10 ms ticks, too coarse for a 30 ms figure; it is
// now the sum of the threads' schedstat nanoseconds, and it grows with
// the work done.
func TestProcessCPUCountsEveryThread(t *testing.T) {
	pid := fmt.Sprint(os.Getpid())
	before, ok := processCPU(pid)
	if !ok || before <= 0 {
		t.Fatalf("processCPU = %s, %v", before, ok)
	}
	for start := time.Now(); time.Since(start) < 20*time.Millisecond; {
	}
	after, ok := processCPU(pid)
	if !ok || after <= before || after%(10*time.Millisecond) == 0 {
		t.Fatalf("processCPU %s then %s after spinning, %v: want growing nanoseconds", before, after, ok)
	}
}
