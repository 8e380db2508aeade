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
	"testing"
	"time"
)

// EnvRIE names the aws-lambda-rie binary.
const EnvRIE = "LOCALEFLOW_RIE"

// invokeWait bounds how long Invoke retries while the emulator starts.
const invokeWait = 20 * time.Second

// Binary is a function's bootstrap and the emulator to run it under.
type Binary struct {
	rie  string
	path string
	// flags are the extra go build flags it was built with.
	flags []string
}

// Build skips the test unless LOCALEFLOW_RIE is set, then builds the
// function package in the current directory into a temporary bootstrap.
func Build(t testing.TB) *Binary {
	t.Helper()
	rie := os.Getenv(EnvRIE)
	if rie == "" {
		t.Skip(EnvRIE + " is not set (make test sets it)")
	}
	return build(t, rie, ".")
}

// BuildStripped is Build with the deployed link flags (-s -w, no symbol
// table or DWARF), for measurements of the deployed binary.
func BuildStripped(t testing.TB) *Binary {
	t.Helper()
	rie := os.Getenv(EnvRIE)
	if rie == "" {
		t.Skip(EnvRIE + " is not set (make test sets it)")
	}
	return build(t, rie, ".", "-ldflags=-s -w")
}

// build builds the function package in dir (the current directory: ".")
// into a temporary bootstrap.
func build(t testing.TB, rie, dir string, flags ...string) *Binary {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bootstrap")
	args := append([]string{"build", "-tags", "lambda.norpc", "-trimpath"}, flags...)
	build := exec.Command("go", append(args, "-o", bin, ".")...)
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build bootstrap in %s: %v\n%s", dir, err, out)
	}
	return &Binary{rie: rie, path: bin, flags: flags}
}

// Function is a bootstrap running under the emulator.
type Function struct {
	url string
	// logs is the file the emulator and the function write to: the
	// process holds it directly, so reading it while they run needs no
	// lock.
	logs string
}

// Start runs the bootstrap under the emulator with the test process's
// environment plus env ("NAME=value"). The emulator is stopped when the
// test ends; its output and the function's is logged if the test failed
// or runs verbose.
func (b *Binary) Start(t testing.TB, env ...string) *Function {
	t.Helper()
	port, apiPort := freePort(t), freePort(t)
	cmd := exec.Command(b.rie, "--runtime-interface-emulator-address", "127.0.0.1:"+port,
		"--runtime-api-address", "127.0.0.1:"+apiPort, b.path)
	cmd.Env = append(os.Environ(), env...)
	logs := filepath.Join(t.TempDir(), "output.log")
	out, err := os.Create(logs)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close() // the child keeps its own descriptor
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start rie: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() || testing.Verbose() {
			b, _ := os.ReadFile(logs)
			t.Logf("rie + bootstrap output:\n%s", b)
		}
	})
	return &Function{url: "http://127.0.0.1:" + port + "/2015-03-31/functions/function/invocations", logs: logs}
}

// Invoke sends one event and returns the function's response, retrying
// the connection while the emulator starts. A non-200 answer fails the
// test.
func (f *Function) Invoke(t testing.TB, payload []byte) []byte {
	t.Helper()
	deadline := time.Now().Add(invokeWait)
	for {
		resp, err := http.Post(f.url, "application/json", bytes.NewReader(payload))
		if err == nil {
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("invoke: http %d %v: %s", resp.StatusCode, err, body)
			}
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("rie did not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Logs returns everything the emulator and the function wrote so far
// (stdout and stderr).
func (f *Function) Logs(t testing.TB) []byte {
	t.Helper()
	return ReadFile(t, f.logs)
}

// ReadFile returns a test file (an event under testdata/).
func ReadFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}
