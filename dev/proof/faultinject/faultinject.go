// Package faultinject fails AWS SDK calls on purpose, for fault-injection
// tests on the local stack.
//
// An Injector is a middleware in the SDK's Deserialize step, added last so
// it sits between the operation's deserializer and the HTTP transport: for
// a call it decides to fail it hands the deserializer a synthesized HTTP
// error response (the same status, headers and JSON body AWS sends), so
// the SDK parses it into its real typed error
// (*types.ProvisionedThroughputExceededException, a ThrottlingException
// API error, InternalServerError, a 503) and the standard retryer, which
// runs in the Finalize step around it, classifies and retries it exactly
// as it would on AWS. Which calls fail is decided by a seeded RNG
// (Fraction) or by position (Every, the Nth call), so a failing run can be
// replayed.
//
// Mode Before fails the call without sending it (the store never saw it);
// mode After sends it, lets the server apply it, then discards the answer
// and fails the call: the ambiguous outcome a timeout or a 5xx after commit
// gives, which conditional writes must survive.
package faultinject

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Fault is one synthesized error response.
type Fault struct {
	Status int
	// Type is the error type AWS JSON protocols put in __type.
	Type    string
	Message string
}

// DynamoDB faults, as DynamoDB answers them.
var (
	ProvisionedThroughputExceeded = Fault{400, "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException", "injected: the level of configured provisioned throughput for the table was exceeded"}
	Throttling                    = Fault{400, "com.amazon.coral.availability#ThrottlingException", "injected: rate of requests exceeds the allowed throughput"}
	InternalServerError           = Fault{500, "com.amazonaws.dynamodb.v20120810#InternalServerError", "injected: internal server error"}
	ServiceUnavailable            = Fault{503, "com.amazon.coral.availability#ServiceUnavailableException", "injected: service unavailable"}
)

// Mode says when a fault strikes.
type Mode int

// Modes.
const (
	// Before fails the call without sending it.
	Before Mode = iota
	// After sends the call and then fails it (applied, answer lost).
	After
)

// Injector decides which calls fail. Configure it before use; Enable and
// Disable may be called at any time.
type Injector struct {
	// Faults are chosen from at random for each failed call.
	Faults []Fault
	// Fraction of eligible calls that fail (seeded RNG), 0..1.
	Fraction float64
	// Every, when > 0, fails every Every-th eligible call instead.
	Every int
	// Operations, when not empty, limits faults to these operation names
	// (e.g. "UpdateItem").
	Operations map[string]bool
	// Mode is Before or After.
	Mode Mode

	mu       sync.Mutex
	rng      *rand.Rand
	enabled  bool
	calls    int
	eligible int
	injected map[string]int
}

// New returns an enabled injector with a seeded RNG.
func New(seed uint64, faults ...Fault) *Injector {
	return &Injector{Faults: faults, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), enabled: true, injected: map[string]int{}}
}

// Enable turns injection on or off.
func (i *Injector) Enable(on bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.enabled = on
}

// Stats reports the calls seen and the faults injected by operation.
func (i *Injector) Stats() (calls int, injected map[string]int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make(map[string]int, len(i.injected))
	total := 0
	for k, v := range i.injected {
		out[k] = v
		total += v
	}
	out["total"] = total
	return i.calls, out
}

// Install adds the injector to a client's middleware stack; use it as an
// APIOptions entry (o.APIOptions = append(o.APIOptions, inj.Install)).
func (i *Injector) Install(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("localeflowFaultInjector", i.handle), middleware.After)
}

func (i *Injector) decide(op string) (Fault, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.calls++
	if !i.enabled || len(i.Faults) == 0 || (len(i.Operations) > 0 && !i.Operations[op]) {
		return Fault{}, false
	}
	i.eligible++
	fail := false
	if i.Every > 0 {
		fail = i.eligible%i.Every == 0
	} else {
		fail = i.rng.Float64() < i.Fraction
	}
	if !fail {
		return Fault{}, false
	}
	f := i.Faults[i.rng.IntN(len(i.Faults))]
	i.injected[op]++
	return f, true
}

func (i *Injector) handle(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	fault, fail := i.decide(awsmiddleware.GetOperationName(ctx))
	if !fail {
		return next.HandleDeserialize(ctx, in)
	}
	var meta middleware.Metadata
	if i.Mode == After {
		out, m, err := next.HandleDeserialize(ctx, in)
		if err != nil {
			return out, m, err
		}
		meta = m
		if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp.Body != nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
	req, _ := in.Request.(*smithyhttp.Request)
	return middleware.DeserializeOutput{RawResponse: fault.response(req)}, meta, nil
}

func (f Fault) response(req *smithyhttp.Request) *smithyhttp.Response {
	body := fmt.Sprintf(`{"__type":%q,"message":%q}`, f.Type, f.Message)
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amzn-Requestid", "injected-fault")
	resp := &http.Response{
		StatusCode: f.Status, Status: fmt.Sprintf("%d %s", f.Status, http.StatusText(f.Status)),
		Header: h, Body: io.NopCloser(bytes.NewReader([]byte(body))), ContentLength: int64(len(body)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
	if req != nil {
		resp.Request = req.Request
	}
	return &smithyhttp.Response{Response: resp}
}
