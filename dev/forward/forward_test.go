package forward

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// backend is a team's dev CMS outside the namespace.
func backend(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "cms says "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// serve runs Serve on ln until the test ends.
func serve(t *testing.T, ln net.Listener, to Endpoint) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, to) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}

func get(url string) (string, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// outerHalf listens on a Unix socket and forwards to the backend.
func outerHalf(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cms.sock")
	ln, err := Listen(Endpoint{"unix", sock})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, ln, Endpoint{"tcp", strings.TrimPrefix(srv.URL, "http://")})
	return sock
}

// TestForwardThroughAUnixSocket: 127.0.0.1 → Unix socket → the CMS, both
// halves in this process.
func TestForwardThroughAUnixSocket(t *testing.T) {
	sock := outerHalf(t, backend(t))
	ln, err := Listen(Endpoint{"tcp", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, ln, Endpoint{"unix", sock})
	for i := range 3 {
		body, err := get("http://" + ln.Addr().String() + "/v1/changes/" + string(rune('a'+i)))
		if err != nil || body != "cms says /v1/changes/"+string(rune('a'+i)) {
			t.Fatalf("through the forward: %q %v", body, err)
		}
	}
}

func TestEndpoints(t *testing.T) {
	for _, bad := range []string{"", "tcp", "udp:1.2.3.4:5", "unix:"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if _, err := Listen(Endpoint{"tcp", "0.0.0.0:0"}); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("non-loopback listen: %v", err)
	}
}

// Variables of the helper process inside the namespace.
const (
	envHelper  = "LOCALEFLOW_FORWARD_HELPER"
	envSock    = "LOCALEFLOW_FORWARD_SOCK"
	envBackend = "LOCALEFLOW_FORWARD_BACKEND"
)

// TestForwardIntoAPrivateNetworkNamespace is the documented setup: the
// outer half here, the inner half and the client in a new network
// namespace (unshare -n, loopback only, like dev/emulators/with-stack.sh),
// where the CMS's address is unreachable except through the forward.
func TestForwardIntoAPrivateNetworkNamespace(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root for unshare -n")
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	srv := backend(t)
	sock := outerHalf(t, srv)
	cmd := exec.Command("unshare", "-n", "sh", "-c", `ip link set lo up && exec "$0" -test.run '^TestInsideNamespaceHelper$' -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), envHelper+"=1", envSock+"="+sock, envBackend+"="+strings.TrimPrefix(srv.URL, "http://"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "inside: cms says /v1/changes/evt-1") {
		t.Fatalf("inside the namespace: %v\n%s", err, out)
	}
}

// TestInsideNamespaceHelper runs only as the helper process.
func TestInsideNamespaceHelper(t *testing.T) {
	if os.Getenv(envHelper) != "1" {
		t.Skip("helper of TestForwardIntoAPrivateNetworkNamespace")
	}
	if _, err := get("http://" + os.Getenv(envBackend) + "/"); err == nil {
		t.Fatal("the CMS is reachable without the forward: not a private namespace")
	}
	ln, err := Listen(Endpoint{"tcp", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, ln, Endpoint{"unix", os.Getenv(envSock)})
	body, err := get("http://" + ln.Addr().String() + "/v1/changes/evt-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("inside: %s", body)
}
