package localtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/awsconfig"
	"github.com/localeflow/localeflow/dev/bootstrap"
	"github.com/localeflow/localeflow/topology"
)

// EnvIntegration switches integration tests on when set to "1".
const EnvIntegration = "LOCALEFLOW_INTEGRATION"

// DefaultRegion is used when AWS_REGION is not set.
const DefaultRegion = "us-east-1"

// endpointVars are the endpoints the stack must serve, by service.
var endpointVars = []struct{ service, specific string }{
	{"DynamoDB", "AWS_ENDPOINT_URL_DYNAMODB"},
	{"SQS", "AWS_ENDPOINT_URL_SQS"},
	{"EventBridge", "AWS_ENDPOINT_URL_EVENTBRIDGE"},
}

var (
	reachOnce      sync.Once
	errUnreachable error
)

// Enabled reports whether integration tests are switched on.
func Enabled() bool { return os.Getenv(EnvIntegration) == "1" }

// Require skips t unless LOCALEFLOW_INTEGRATION=1. When set, every endpoint
// (DynamoDB, SQS, EventBridge) must be configured and accept a TCP
// connection, otherwise t fails.
func Require(t testing.TB) {
	t.Helper()
	if !Enabled() {
		t.Skipf("integration test: set %s=1 and start the local stack (make test does both)", EnvIntegration)
	}
	reachOnce.Do(func() { errUnreachable = checkReachable() })
	if errUnreachable != nil {
		t.Fatalf("localtest: %s=1 but the local stack is not usable: %v", EnvIntegration, errUnreachable)
	}
}

func checkReachable() error {
	for _, e := range endpointVars {
		raw := endpoint(e.specific)
		if raw == "" {
			return fmt.Errorf("no endpoint for %s: set %s or AWS_ENDPOINT_URL", e.service, e.specific)
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return fmt.Errorf("%s endpoint %q is not a URL", e.service, raw)
		}
		host := u.Host
		if u.Port() == "" {
			port := "80"
			if u.Scheme == "https" {
				port = "443"
			}
			host = net.JoinHostPort(u.Hostname(), port)
		}
		conn, err := net.DialTimeout("tcp", host, 3*time.Second)
		if err != nil {
			return fmt.Errorf("%s endpoint %s does not answer: %w", e.service, raw, err)
		}
		_ = conn.Close()
	}
	return nil
}

func endpoint(specific string) string {
	if v := os.Getenv(specific); v != "" {
		return v
	}
	return os.Getenv("AWS_ENDPOINT_URL")
}

// Config returns an AWS config for the local stack: endpoints from the
// environment, static test credentials, AWS_REGION or us-east-1.
func Config(t testing.TB) aws.Config {
	t.Helper()
	Require(t)
	opts := []func(*config.LoadOptions) error{
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
	}
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, config.WithRegion(DefaultRegion))
	}
	if os.Getenv("LOCALEFLOW_EMULATOR") == "moto" {
		opts = append(opts, config.WithHTTPClient(motoHTTPClient))
	}
	cfg, err := awsconfig.Load(context.Background(), opts...)
	if err != nil {
		t.Fatalf("localtest: %v", err)
	}
	return cfg
}

// motoHTTPClient opens a connection per request: moto_server (werkzeug)
// closes kept-alive connections in the middle of an answer
// (docs/design.md, "Two emulators").
var motoHTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.DisableKeepAlives = true })

// DynamoDB returns a client for the local DynamoDB (response checksum
// validation off, as emulators send none).
func DynamoDB(t testing.TB) *dynamodb.Client {
	t.Helper()
	return awsclient.DynamoDB(Config(t))
}

// SQS returns a client for the local SQS.
func SQS(t testing.TB) *sqs.Client {
	t.Helper()
	return awsclient.SQS(Config(t))
}

// EventBridge returns a client for the local EventBridge.
func EventBridge(t testing.TB) *eventbridge.Client {
	t.Helper()
	return awsclient.EventBridge(Config(t))
}

// Clients returns the three clients bundled for bootstrap.
func Clients(t testing.TB) bootstrap.Clients {
	t.Helper()
	cfg := Config(t)
	return bootstrap.Clients{
		DynamoDB:    awsclient.DynamoDB(cfg),
		SQS:         awsclient.SQS(cfg),
		EventBridge: awsclient.EventBridge(cfg),
	}
}

// Topology creates every resource of a fresh, uniquely prefixed topology
// and deletes them when the test ends.
func Topology(t testing.TB) topology.Topology {
	t.Helper()
	topo, _ := Stack(t)
	return topo
}

// Stack is Topology that also returns what was created (queue URLs and
// ARNs, the bus ARN, the rules).
func Stack(t testing.TB) (topology.Topology, bootstrap.Resources) {
	t.Helper()
	clients := Clients(t)
	topo := topology.New(UniquePrefix(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Registered before Apply so that a half-created stack is removed too.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := bootstrap.Destroy(ctx, clients, topo); err != nil {
			t.Errorf("localtest: destroy %s: %v", topo.Prefix, err)
		}
	})
	res, err := bootstrap.Apply(ctx, clients, topo)
	if err != nil {
		t.Fatalf("localtest: create resources %s: %v", topo.Prefix, err)
	}
	return topo, res
}

// Table creates only one table of a fresh, uniquely prefixed topology —
// pick chooses which, e.g. func(t topology.Topology) topology.Table {
// return t.Monitor } — through bootstrap.ApplyTable, and deletes it when
// the test ends. For store tests that need no queues or bus. It returns
// the client and the table's definition.
func Table(t testing.TB, pick func(topology.Topology) topology.Table) (*dynamodb.Client, topology.Table) {
	t.Helper()
	Require(t)
	db := DynamoDB(t)
	spec := pick(topology.New(UniquePrefix(t)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := bootstrap.DestroyTable(ctx, db, spec.Name); err != nil {
			t.Errorf("localtest: %v", err)
		}
	})
	if err := bootstrap.ApplyTable(ctx, db, spec); err != nil {
		t.Fatalf("localtest: %v", err)
	}
	return db, spec
}

// UniquePrefix returns a valid topology prefix made of the test's name
// (for reading logs) and random hex (for uniqueness across runs and
// parallel tests).
func UniquePrefix(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		if b.Len() >= 20 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if s := b.String(); s != "" && !strings.HasSuffix(s, "-") {
				b.WriteByte('-')
			}
		}
	}
	var rnd [5]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatalf("localtest: random prefix: %v", err)
	}
	prefix := "t-" + strings.TrimSuffix(b.String(), "-") + "-" + hex.EncodeToString(rnd[:])
	if err := topology.ValidatePrefix(prefix); err != nil {
		t.Fatalf("localtest: %v", err)
	}
	return prefix
}
