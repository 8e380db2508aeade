package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// isolateAWS leaves the SDK no credentials or config but what the test
// sets.
func isolateAWS(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_REGION": "us-east-1",
	} {
		t.Setenv(k, v)
	}
}

// TestUnknownCommandWithHelpFails: `localeflow bogus --help` printed the
// usage and exited 0.
func TestUnknownCommandWithHelpFails(t *testing.T) {
	r := runCLI(map[string]string{}, "bogus", "--help")
	if r.code != exitUsage || !strings.Contains(r.err, `unknown command "bogus"`) {
		t.Fatalf("bogus --help: %+v", r)
	}
}

// TestUsageErrorIsOneLineAndAHint: every usage error was followed by the
// whole usage; now one line and where to read more.
func TestUsageErrorIsOneLineAndAHint(t *testing.T) {
	for _, args := range [][]string{{"frob"}, {"status"}, {"list", "--kind", "job", "--prefix", "p"}} {
		r := runCLI(map[string]string{}, args...)
		lines := strings.Split(strings.TrimSpace(r.err), "\n")
		if r.code != exitUsage || len(lines) != 2 || !strings.HasPrefix(lines[1], "see localeflow ") || strings.Contains(r.err, "commands:") {
			t.Errorf("%v: %+v", args, r)
		}
	}
	if r := runCLI(map[string]string{}, "status"); !strings.Contains(r.err, "see localeflow status --help") {
		t.Errorf("status: hint %q", r.err)
	}
}

// TestMissingCredentialsHaveTheirCode: without any credentials a command
// failed as lifecycle_monitor.store_unavailable with the SDK's text; it
// now stops before any call with cli.credentials_missing.
func TestMissingCredentialsHaveTheirCode(t *testing.T) {
	isolateAWS(t)
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:9")
	for _, args := range [][]string{{"--prefix=p", "status", "evt-1"}, {"--prefix=p", "health"}, {"--prefix=p", "keys"}, {"--prefix=p", "quarantine", "list"}} {
		r := runCLI(map[string]string{}, args...)
		if r.code != exitRuntime || !strings.Contains(r.err, codeCredentials) || strings.Contains(r.err, "store_unavailable") {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

// TestDeploymentMustBeNamed: quarantine (and keys) silently used the
// default prefix while the table commands refused; all now need --prefix
// (or the variables).
func TestDeploymentMustBeNamed(t *testing.T) {
	for _, args := range [][]string{{"quarantine", "list"}, {"quarantine", "replay", "--all"}, {"keys"}} {
		r := runCLI(map[string]string{}, args...)
		if r.code != exitUsage || !strings.Contains(r.err, "--prefix") {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

// TestRegionAndProfile: --region and --profile reach the SDK's
// configuration.
func TestRegionAndProfile(t *testing.T) {
	isolateAWS(t)
	t.Setenv("AWS_REGION", "") // the variable outranks the profile's region
	cfgFile := os.Getenv("AWS_CONFIG_FILE")
	if err := os.WriteFile(cfgFile, []byte("[profile team]\nregion = ap-south-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv("AWS_SHARED_CREDENTIALS_FILE"), []byte("[team]\naws_access_key_id = AKIDTEAM\naws_secret_access_key = s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &cli{profile: "team"}
	cfg, err := c.loadAWS(context.Background())
	if err != nil || cfg.Region != "ap-south-1" {
		t.Fatalf("--profile: %v region %q", err, cfg.Region)
	}
	if creds, _ := cfg.Credentials.Retrieve(context.Background()); creds.AccessKeyID != "AKIDTEAM" {
		t.Errorf("--profile credentials %q", creds.AccessKeyID)
	}
	c = &cli{profile: "team", region: "eu-west-3"}
	if cfg, err = c.loadAWS(context.Background()); err != nil || cfg.Region != "eu-west-3" {
		t.Fatalf("--region: %v region %q", err, cfg.Region)
	}
	if r := runCLI(map[string]string{}, "--region", "eu-west-3", "--profile", "team", "--help"); r.code != exitOK {
		t.Errorf("global flags: %+v", r)
	}
}

// fakeFunctionURL answers like the health Function URL (AWS_IAM): it
// recomputes the SigV4 signature of every request with the test
// credentials and refuses a request it does not match.
func fakeFunctionURL(t *testing.T, status int) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
		if err != nil {
			http.Error(w, "no date", http.StatusForbidden)
			return
		}
		check, _ := http.NewRequest(http.MethodGet, "http://"+r.Host+r.URL.RequestURI(), nil)
		if a := r.Header.Get("Accept"); a != "" {
			check.Header.Set("Accept", a)
		}
		creds := aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret"}
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, check, emptyPayloadHash, "lambda", "us-east-1", at); err != nil {
			t.Error(err)
		}
		if got, want := r.Header.Get("Authorization"), check.Header.Get("Authorization"); got == "" || got != want {
			http.Error(w, "signature mismatch", http.StatusForbidden)
			return
		}
		if strings.Contains(r.Header.Get("Accept"), "text/html") {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, "<html>health page</html>")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	}))
}

func testCreds(t *testing.T) {
	t.Helper()
	isolateAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
}

// TestHealthHTMLSignsWithTheCallersCredentials: the Function URL needs
// SigV4, which a browser cannot add; --html fetches the page signed with
// the caller's credentials and writes it (exit 1 when blocked).
func TestHealthHTMLSignsWithTheCallersCredentials(t *testing.T) {
	testCreds(t)
	env := map[string]string{"LOCALEFLOW_ALLOW_INSECURE_HTTP": "1"}
	for _, tc := range []struct {
		status int
		exit   int
		says   string
	}{{http.StatusOK, exitOK, "health: ok"}, {http.StatusServiceUnavailable, exitBad, "health: blocked"}} {
		srv := fakeFunctionURL(t, tc.status)
		file := filepath.Join(t.TempDir(), "health.html")
		r := runCLI(env, "health", "--html", file, "--url", srv.URL+"/")
		srv.Close()
		page, _ := os.ReadFile(file)
		if r.code != tc.exit || !strings.Contains(r.out, tc.says) || string(page) != "<html>health page</html>" {
			t.Errorf("status %d: %+v page %q", tc.status, r, page)
		}
	}
	// --json: one document (it printed prose).
	srv := fakeFunctionURL(t, http.StatusServiceUnavailable)
	file := filepath.Join(t.TempDir(), "health.html")
	r := runCLI(env, "--json", "health", "--html", file, "--url", srv.URL+"/")
	srv.Close()
	var doc map[string]string
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil || r.code != exitBad || doc["status"] != "blocked" || doc["file"] != file {
		t.Errorf("--html --json: %+v (%v)", r, err)
	}
	// Wrong credentials: the URL refuses, the CLI says what is missing.
	srv = fakeFunctionURL(t, http.StatusOK)
	defer srv.Close()
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	r = runCLI(env, "health", "--html", filepath.Join(t.TempDir(), "x.html"), "--url", srv.URL+"/")
	if r.code != exitBad || !strings.Contains(r.err, codeHealthPage) || !strings.Contains(r.err, "lambda:InvokeFunctionUrl") {
		t.Errorf("refused: %+v", r)
	}
	if r := runCLI(map[string]string{}, "health", "--html", "x.html", "--url", "http://plain.example/"); r.code != exitBad || !strings.Contains(r.err, codeHealthURL) {
		t.Errorf("plain http URL: %+v", r)
	}
}

// TestHealthServeOnLoopback: --serve answers a browser on 127.0.0.1 with
// the signed page, and refuses a non-loopback --listen.
func TestHealthServeOnLoopback(t *testing.T) {
	testCreds(t)
	srv := fakeFunctionURL(t, http.StatusServiceUnavailable)
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c := &cli{getenv: func(k string) string { return map[string]string{"LOCALEFLOW_ALLOW_INSECURE_HTTP": "1"}[k] }, healthURL: srv.URL + "/"}
	f, err := c.healthFetcher(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- serveHealth(ctx, ln, f) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || string(body) != "<html>health page</html>" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("page: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, err = http.Get("http://" + ln.Addr().String() + "/?format=json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != `{"status":"ok"}` {
		t.Errorf("json: %q", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	r := runCLI(map[string]string{}, "health", "--serve", "--listen", "0.0.0.0:8765", "--url", "https://x.lambda-url.us-east-1.on.aws/")
	if r.code != exitUsage || !strings.Contains(r.err, "loopback") {
		t.Errorf("non-loopback listen: %+v", r)
	}
}

// TestVersionFromBuildInfo: --version printed "(devel)" for every build
// from a checkout; it now prints the Makefile's git describe (or the
// module version) with the VCS revision.
func TestVersionFromBuildInfo(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"},
	}}
	if got := versionOf(info, "v0.3.0-4-gabc"); got != "v0.3.0-4-gabc 0123456789ab+dirty" {
		t.Errorf("checkout build: %q", got)
	}
	info.Main.Version = "v1.2.0"
	info.Settings = nil
	if got := versionOf(info, ""); got != "v1.2.0" {
		t.Errorf("module build: %q", got)
	}
}

// TestTableCommandsRefuseTwoDeployments: the table commands took the
// table variables as given, whatever the other variables said; tables of
// two deployments, or tables of one and LOCALEFLOW_DEPLOYMENT of another,
// are now refused (cli.deployment_ambiguous, exit 1) before any call.
// --prefix decides alone; tables named by hand (no deployment's naming)
// name themselves.
func TestTableCommandsRefuseTwoDeployments(t *testing.T) {
	isolateAWS(t)
	for _, env := range []map[string]string{
		{"LOCALEFLOW_MONITOR_TABLE": "acme-monitor", "LOCALEFLOW_RELEASE_TABLE": "beta-release"},
		{"LOCALEFLOW_MONITOR_TABLE": "acme-monitor", "LOCALEFLOW_RELEASE_TABLE": "acme-release", "LOCALEFLOW_DEPLOYMENT": "beta"},
		{"LOCALEFLOW_MONITOR_TABLE": "acme-monitor", "LOCALEFLOW_RELEASE_TABLE": "acme-release", "LOCALEFLOW_POLL_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/1/beta-poll"},
	} {
		for _, args := range [][]string{{"health"}, {"ack", "evt-1", "--reason", "x"}, {"requeue", "evt-1"}, {"status", "evt-1"}} {
			if r := runCLI(env, args...); r.code != exitBad || !strings.Contains(r.err, codeDeploymentAmbiguous) {
				t.Errorf("%v %v: %+v", env, args, r)
			}
		}
	}
	// Not refused (they fail later, on the missing credentials).
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{map[string]string{"LOCALEFLOW_MONITOR_TABLE": "acme-monitor", "LOCALEFLOW_RELEASE_TABLE": "beta-release"}, []string{"--prefix", "acme", "health"}},
		{map[string]string{"LOCALEFLOW_MONITOR_TABLE": "m", "LOCALEFLOW_RELEASE_TABLE": "r", "LOCALEFLOW_DEPLOYMENT": "acme"}, []string{"health"}},
	} {
		if r := runCLI(tc.env, tc.args...); r.code != exitRuntime || !strings.Contains(r.err, codeCredentials) {
			t.Errorf("%v %v: %+v", tc.env, tc.args, r)
		}
	}
}
