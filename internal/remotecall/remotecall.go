// Package remotecall measures the remote calls of one invocation (CMS
// lifecycle, CMS delivery, evidence) and writes them as one CloudWatch
// EMF document per invocation: each kind's latencies as one metric (unit
// Milliseconds, the values as an EMF array, so CloudWatch's p50/p99 count
// every call), and the slowest call's kind, duration and request id for
// the saved query "slowest CMS calls". Content-free: kinds, counts,
// milliseconds, ids.
package remotecall

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/internal/emf"
	"github.com/localeflow/localeflow/internal/xray"
)

// Kinds of remote call.
const (
	KindCMSLifecycle = "cms_lifecycle"
	KindCMSDelivery  = "cms_delivery"
	KindEvidence     = "evidence"
)

// Metric is the latency metric of each kind.
var Metric = map[string]string{
	KindCMSLifecycle: contract.MetricCMSLifecycleLatency,
	KindCMSDelivery:  contract.MetricCMSDeliveryLatency,
	KindEvidence:     contract.MetricEvidenceLatency,
}

// maxValues is EMF's limit of values in one metric array; more calls
// continue in further documents.
const maxValues = 100

// Recorder collects one invocation's calls.
type Recorder struct {
	mu       sync.Mutex
	ms       map[string][]int64
	calls    int
	slowKind string
	slowMS   int64
	slowID   string
}

type recorderKey struct{}

// With returns ctx carrying a fresh Recorder.
func With(ctx context.Context) (context.Context, *Recorder) {
	r := &Recorder{ms: map[string][]int64{}}
	return context.WithValue(ctx, recorderKey{}, r), r
}

// Observe records one call of kind that took d (its signed request id
// for the slowest-call fields); without a Recorder in ctx it does nothing.
func Observe(ctx context.Context, kind, requestID string, d time.Duration) {
	r, _ := ctx.Value(recorderKey{}).(*Recorder)
	if r == nil || Metric[kind] == "" {
		return
	}
	ms := max(0, d.Milliseconds())
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ms[kind] = append(r.ms[kind], ms)
	r.calls++
	if r.calls == 1 || ms > r.slowMS {
		r.slowKind, r.slowMS, r.slowID = kind, ms, requestID
	}
}

// Lines are the invocation's EMF documents (none without a call): the
// first carries the slowest call and the count.
func (r *Recorder) Lines(ctx context.Context, deployment string, nowMS int64) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == 0 {
		return nil
	}
	if deployment == "" {
		deployment = emf.DefaultDeployment
	}
	var lines [][]byte
	for first := true; ; first = false {
		doc := map[string]any{"msg": contract.LogRemoteCalls, contract.MetricDeploymentDimension: deployment}
		if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
			doc["request_id"] = lc.AwsRequestID
		}
		if id := xray.TraceID(ctx); id != "" {
			doc["xray_trace_id"] = id
		}
		if first {
			doc["remote_calls"] = r.calls
			doc["slowest_remote"], doc["slowest_remote_ms"], doc["slowest_request_id"] = r.slowKind, r.slowMS, r.slowID
		}
		var defs []map[string]string
		for _, kind := range []string{KindCMSLifecycle, KindCMSDelivery, KindEvidence} {
			vals := r.ms[kind]
			if len(vals) == 0 {
				continue
			}
			n := min(len(vals), maxValues)
			doc[Metric[kind]], r.ms[kind] = vals[:n], vals[n:]
			defs = append(defs, map[string]string{"Name": Metric[kind], "Unit": contract.MetricUnit(Metric[kind])})
		}
		if len(defs) == 0 {
			break
		}
		doc["_aws"] = map[string]any{"Timestamp": nowMS, "CloudWatchMetrics": []any{map[string]any{
			"Namespace": contract.MetricNamespace, "Dimensions": [][]string{{contract.MetricDeploymentDimension}}, "Metrics": defs,
		}}}
		line, err := json.Marshal(doc)
		if err == nil {
			lines = append(lines, line)
		}
	}
	return lines
}

// Wrap runs h with a Recorder in its context and writes the invocation's
// documents to w when h returns (whatever it returns).
func Wrap[In, Out any](h func(context.Context, In) (Out, error), w io.Writer, deployment string) func(context.Context, In) (Out, error) {
	var mu sync.Mutex
	return func(ctx context.Context, in In) (Out, error) {
		ctx, r := With(ctx)
		defer func() {
			mu.Lock()
			defer mu.Unlock()
			for _, line := range r.Lines(ctx, deployment, time.Now().UnixMilli()) {
				_, _ = w.Write(append(line, '\n'))
			}
		}()
		return h(ctx, in)
	}
}
