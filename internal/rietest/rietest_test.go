package rietest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
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
	f := &Function{url: srv.URL + "/2015-03-31/functions/function/invocations", logs: &syncBuffer{}}
	if got := string(f.Invoke(t, []byte(`{"n":1}`))); got != `{"echo":{"n":1}}` {
		t.Fatalf("response %s", got)
	}
}

func TestLogsWhileWritten(t *testing.T) {
	f := &Function{logs: &syncBuffer{}}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = fmt.Fprintf(f.logs, "line %d\n", i)
			}
		}()
	}
	for range 100 {
		_ = f.Logs()
	}
	wg.Wait()
	if n := len(f.Logs()); n != 4*100*len("line 0\n") {
		t.Fatalf("%d bytes", n)
	}
}

func TestReadFile(t *testing.T) {
	if got := string(ReadFile(t, "doc.go")); !strings.Contains(got, "package rietest") {
		t.Fatalf("doc.go reads %q", got)
	}
}
