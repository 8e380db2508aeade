package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// Invoker invokes one Lambda function synchronously with a JSON payload and
// returns its response payload. A function error (the handler returned an
// error, panicked or timed out) is a *FunctionError.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// InvokerFunc adapts a function to Invoker.
type InvokerFunc func(ctx context.Context, payload []byte) ([]byte, error)

// Invoke implements Invoker.
func (f InvokerFunc) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return f(ctx, payload)
}

// FunctionError is an invocation that failed inside the function: the
// handler returned an error, panicked, or ran past its timeout.
type FunctionError struct {
	Type    string
	Message string
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("function error %s: %s", e.Type, e.Message)
}

// RIE invokes a function running under aws-lambda-rie through its
// invocation endpoint. aws-lambda-rie runs one invocation at a time, so
// calls are serialized (like a function with reserved concurrency 1).
type RIE struct {
	// URL is http://127.0.0.1:PORT/2015-03-31/functions/function/invocations.
	URL    string
	Client *http.Client

	mu sync.Mutex
}

var _ Invoker = (*RIE)(nil)

// maxResponse is Lambda's synchronous response payload limit (6 MB).
const maxResponse = 6 << 20

// Invoke implements Invoker. aws-lambda-rie answers a handler error with
// 200 and {"errorMessage","errorType"}, a timeout with 200 and the plain
// text "Task timed out after …", and a panic or crash with 502; all three
// are a *FunctionError.
func (r *RIE) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	client := r.Client
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", r.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("invoke: read response: %w", err)
	}
	if len(body) > maxResponse {
		return nil, &FunctionError{Type: "Function.ResponseSizeTooLarge", Message: "response over 6 MB"}
	}
	if fe := functionError(resp.StatusCode, body); fe != nil {
		return nil, fe
	}
	return body, nil
}

// functionError classifies an aws-lambda-rie answer.
func functionError(status int, body []byte) *FunctionError {
	trimmed := bytes.TrimSpace(body)
	var e struct {
		ErrorMessage *string `json:"errorMessage"`
		ErrorType    string  `json:"errorType"`
	}
	isErr := len(trimmed) > 0 && trimmed[0] == '{' && json.Unmarshal(trimmed, &e) == nil && e.ErrorMessage != nil && e.ErrorType != ""
	switch {
	case isErr:
		return &FunctionError{Type: e.ErrorType, Message: *e.ErrorMessage}
	case status != http.StatusOK:
		return &FunctionError{Type: "Runtime.HTTP" + strconv.Itoa(status), Message: firstLine(trimmed)}
	case len(trimmed) > 0 && !json.Valid(trimmed):
		// "Task timed out after 2.00 seconds" and other runtime messages.
		return &FunctionError{Type: "Runtime.InvalidResponse", Message: firstLine(trimmed)}
	}
	return nil
}

func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// RIEConfig starts a function binary under aws-lambda-rie.
type RIEConfig struct {
	// RIE is the aws-lambda-rie binary; Bootstrap the function binary.
	RIE       string
	Bootstrap string
	// Env is the function's environment (added to the current one).
	Env []string
	// Timeout is the function timeout (AWS_LAMBDA_FUNCTION_TIMEOUT).
	Timeout time.Duration
	// Output receives rie's and the function's output (nil discards).
	Output io.Writer
}

// Process is a running aws-lambda-rie with its function.
type Process struct {
	*RIE
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartRIE starts the function under aws-lambda-rie on two free
// 127.0.0.1 ports and waits (bounded by ctx) until it accepts invocations.
func StartRIE(ctx context.Context, c RIEConfig) (*Process, error) {
	if c.RIE == "" || c.Bootstrap == "" {
		return nil, errors.New("runner: RIEConfig needs RIE and Bootstrap")
	}
	for _, p := range []string{c.RIE, c.Bootstrap} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("runner: %w", err)
		}
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	cmd := exec.Command(c.RIE, "--runtime-interface-emulator-address", addr,
		"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(ports[1]), c.Bootstrap)
	cmd.Env = append(os.Environ(), c.Env...)
	if c.Timeout > 0 {
		cmd.Env = append(cmd.Env, "AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(int(c.Timeout/time.Second)))
	}
	out := c.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("runner: start %s: %w", c.RIE, err)
	}
	p := &Process{RIE: &RIE{URL: "http://" + addr + "/2015-03-31/functions/function/invocations"}, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := p.awaitListening(ctx, addr); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func (p *Process) awaitListening(ctx context.Context, addr string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("runner: aws-lambda-rie exited before listening: %w", p.err)
		case <-ctx.Done():
			return fmt.Errorf("runner: aws-lambda-rie did not listen on %s: %w", addr, ctx.Err())
		case <-tick.C:
		}
	}
}

// PID is the aws-lambda-rie process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Stop terminates aws-lambda-rie (which stops the function) and waits for
// it, killing it after 5 s.
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("runner: free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
