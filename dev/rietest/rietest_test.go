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
