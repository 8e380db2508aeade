package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
)

// Codes of the health page (`health --serve`, `health --html`).
const (
	// codeHealthURL: no health Function URL given, or not an https URL.
	codeHealthURL = "cli.health_url_invalid"
	// codeHealthPage: the Function URL could not be read (network, denied).
	codeHealthPage = "cli.health_page_unavailable"
	// codeListen: --listen is not a loopback address or cannot be bound.
	codeListen = "cli.listen_refused"
)

// EnvHealthURL is the health Function URL (the stack output HealthUrl)
// when --url is not given.
const EnvHealthURL = "LOCALEFLOW_HEALTH_URL"

// defaultListen is where `health --serve` listens: loopback only.
const defaultListen = "127.0.0.1:8765"

// emptyPayloadHash is the SigV4 payload hash of a GET (no body).
var emptyPayloadHash = func() string { s := sha256.Sum256(nil); return hex.EncodeToString(s[:]) }()

// pageFetcher reads the health page from the Function URL, signing each
// request (SigV4, service lambda) with the caller's credentials.
type pageFetcher struct {
	url    string
	cfg    aws.Config
	client *http.Client
	now    func() time.Time
}

// fetch GETs the page (accept: "text/html" for people, "" for JSON) and
// returns the status, content type and body.
func (f pageFetcher) fetch(ctx context.Context, accept string) (int, string, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url, nil)
	if err != nil {
		return 0, "", nil, core.Wrap(codeHealthURL, false, err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	creds, err := f.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return 0, "", nil, core.Wrap(codeCredentials, true, fmt.Errorf("no AWS credentials to sign the health request: %s", firstLineOf(err)))
	}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, emptyPayloadHash, "lambda", f.cfg.Region, f.now()); err != nil {
		return 0, "", nil, core.Wrap(codeHealthPage, true, err)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, "", nil, core.Wrap(codeHealthPage, true, fmt.Errorf("GET %s: %s", f.url, firstLineOf(err)))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, "", nil, core.Wrap(codeHealthPage, true, err)
	}
	if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized {
		return 0, "", nil, core.Wrap(codeHealthPage, false, fmt.Errorf("GET %s: %s: the caller needs lambda:InvokeFunctionUrl on the health function (GrantHealthRead)", f.url, resp.Status))
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body, nil
}

// firstLineOf is an error's first line (SDK errors carry long details).
func firstLineOf(err error) string {
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}

// healthFetcher resolves the URL and the caller's AWS configuration.
func (c *cli) healthFetcher(ctx context.Context) (pageFetcher, error) {
	raw := firstNonEmpty(c.healthURL, strings.TrimSpace(c.getenv(EnvHealthURL)))
	u, err := url.Parse(raw)
	if raw == "" || err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && c.getenv(contract.EnvAllowInsecureHTTP) == "1")) {
		return pageFetcher{}, core.Wrap(codeHealthURL, false, fmt.Errorf("give the health Function URL (the stack output HealthUrl) with --url or %s: an https URL", EnvHealthURL))
	}
	cfg, err := c.loadAWS(ctx)
	if err != nil {
		return pageFetcher{}, err
	}
	return pageFetcher{url: raw, cfg: cfg, client: &http.Client{Timeout: 30 * time.Second}, now: time.Now}, nil
}

// healthPage runs --serve or --html.
func (c *cli) healthPage(ctx context.Context) error {
	switch {
	case c.serve && c.htmlFile != "":
		return usagef("health: --serve or --html, not both")
	case c.htmlFile != "" && c.listen != "":
		return usagef("health: --listen goes with --serve")
	case c.serve:
		return c.healthServe(ctx)
	}
	return c.healthHTML(ctx)
}

// healthHTML writes the page to c.htmlFile (exit 1 when blocked, like
// `health`).
func (c *cli) healthHTML(ctx context.Context) error {
	f, err := c.healthFetcher(ctx)
	if err != nil {
		return err
	}
	status, _, body, err := f.fetch(ctx, "text/html")
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusServiceUnavailable {
		return core.Wrap(codeHealthPage, true, fmt.Errorf("GET %s: HTTP %d", f.url, status))
	}
	if err := os.WriteFile(c.htmlFile, body, 0o600); err != nil {
		return core.Wrap(codeRuntime, false, err)
	}
	verdict := "ok"
	if status == http.StatusServiceUnavailable {
		verdict = "blocked"
	}
	if c.jsonOut {
		if err := c.printJSON(map[string]string{"status": verdict, "file": c.htmlFile, "url": f.url}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.out, "health: %s; page written to %s (open it in a browser)\n", verdict, c.htmlFile)
	}
	if verdict == "blocked" {
		return badError{"health.blocked"}
	}
	return nil
}

// healthServe serves the page on a loopback address until ctx ends: every
// GET / fetches the page from the Function URL signed with the caller's
// credentials, so on-call opens it in a browser.
func (c *cli) healthServe(ctx context.Context) error {
	addr := firstNonEmpty(c.listen, defaultListen)
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return usagef("health --serve: --listen %q must be a loopback address, e.g. %s (the page is for you only)", addr, defaultListen)
	}
	f, err := c.healthFetcher(ctx)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return core.Wrap(codeListen, false, err)
	}
	if c.jsonOut {
		if err := c.printJSON(map[string]string{"serving": "http://" + ln.Addr().String() + "/", "url": f.url}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.out, "health page of %s at http://%s/ (signed with your AWS credentials; Ctrl-C stops)\n", f.url, ln.Addr())
	}
	return serveHealth(ctx, ln, f)
}

// serveHealth answers GET / on ln with the signed page until ctx ends.
func serveHealth(ctx context.Context, ln net.Listener, f pageFetcher) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		accept := "text/html"
		if r.URL.Query().Get("format") == "json" {
			accept = ""
		}
		status, ctype, body, err := f.fetch(r.Context(), accept)
		if err != nil {
			http.Error(w, core.CodeOf(err)+": "+err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		return nil
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return core.Wrap(codeListen, true, err)
	}
}
