// Package emf writes CloudWatch Embedded Metric Format documents: one JSON
// log line whose "_aws" member tells CloudWatch Logs which members are
// metrics. No SDK call; Lambda's log stream carries them. Every metric is
// in namespace contract.MetricNamespace and every dimension set starts
// with contract.MetricDeploymentDimension (the resource prefix), so two
// deployments in one account never share a series.
package emf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/internal/lambdalog"
	"github.com/localeflow/localeflow/topology"
)

// DefaultDeployment is the Deployment dimension when none is configured
// (the default resource prefix).
const DefaultDeployment = topology.DefaultPrefix

// Metric is one named value. Its CloudWatch unit is
// contract.MetricUnit(Name): Count unless the contract says otherwise
// (OldestDueSeconds is in Seconds).
type Metric struct {
	Name  string
	Value int
}

// Group is metrics published under the same dimension sets. Each set is
// given without Deployment, which is prepended; no set means [Deployment]
// alone.
type Group struct {
	Dimensions [][]string
	Metrics    []Metric
}

type metricDef struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type directive struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []metricDef `json:"Metrics"`
}

type meta struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// Line is one EMF document at timestampMS: values are the dimension values
// besides Deployment (content-free: names, states, codes), each group a
// directive. Units are contract.MetricUnit of each name (Count unless
// the contract gives another).
func Line(deployment string, timestampMS int64, values map[string]string, groups ...Group) []byte {
	if deployment == "" {
		deployment = DefaultDeployment
	}
	doc := map[string]any{}
	for k, v := range values {
		doc[k] = v
	}
	doc[contract.MetricDeploymentDimension] = deployment
	// Lambda's log-level filter drops a JSON line whose "level" is below
	// the function's ApplicationLogLevel and reads a line without one as
	// INFO: a metric line carries the function's own level (at least
	// INFO), which the filter always keeps.
	doc["level"] = lineLevel()
	m := meta{Timestamp: timestampMS}
	for _, g := range groups {
		d := directive{Namespace: contract.MetricNamespace}
		if len(g.Dimensions) == 0 {
			d.Dimensions = [][]string{{contract.MetricDeploymentDimension}}
		}
		for _, set := range g.Dimensions {
			d.Dimensions = append(d.Dimensions, append([]string{contract.MetricDeploymentDimension}, set...))
		}
		for _, metric := range g.Metrics {
			d.Metrics = append(d.Metrics, metricDef{Name: metric.Name, Unit: contract.MetricUnit(metric.Name)})
			doc[metric.Name] = metric.Value
		}
		m.CloudWatchMetrics = append(m.CloudWatchMetrics, d)
	}
	doc["_aws"] = m
	line, err := json.Marshal(doc)
	if err != nil {
		// Only ints and strings: cannot fail.
		return []byte(`{}`)
	}
	return line
}

// Writer writes EMF lines of one deployment to W (os.Stdout in Lambda),
// one whole line per Write, safe for concurrent use. A nil *Writer writes
// nothing.
type Writer struct {
	w          io.Writer
	deployment string
	now        func() time.Time
	mu         sync.Mutex
}

// NewWriter returns a Writer of deployment's metrics to w, timestamped
// with now (nil: time.Now).
func NewWriter(w io.Writer, deployment string, now func() time.Time) *Writer {
	if now == nil {
		now = time.Now
	}
	return &Writer{w: w, deployment: deployment, now: now}
}

// Emit writes one line (Line) timestamped now.
func (w *Writer) Emit(values map[string]string, groups ...Group) {
	if w == nil || w.w == nil {
		return
	}
	line := append(Line(w.deployment, w.now().UnixMilli(), values, groups...), '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.w.Write(line)
}

// Count is a Group of one metric of value 1 under [Deployment] and
// [Deployment, dimension] (the dimension's value given in Emit's values).
func Count(name, dimension string) Group {
	return Group{Dimensions: [][]string{{}, {dimension}}, Metrics: []Metric{{Name: name, Value: 1}}}
}

// Names returns the metric names an EMF line declares, after checking that
// every directive is in contract.MetricNamespace, every dimension set
// starts with Deployment, and every dimension and metric has its member
// (for tests of what a function emits).
func Names(line []byte) ([]string, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(line, &doc); err != nil {
		return nil, fmt.Errorf("emf: not JSON: %w", err)
	}
	var m meta
	if err := json.Unmarshal(doc["_aws"], &m); err != nil || len(m.CloudWatchMetrics) == 0 {
		return nil, fmt.Errorf("emf: no _aws.CloudWatchMetrics in %s", line)
	}
	var names []string
	for _, d := range m.CloudWatchMetrics {
		if d.Namespace != contract.MetricNamespace {
			return nil, fmt.Errorf("emf: namespace %q", d.Namespace)
		}
		for _, set := range d.Dimensions {
			if len(set) == 0 || set[0] != contract.MetricDeploymentDimension {
				return nil, fmt.Errorf("emf: dimension set %v does not start with %s", set, contract.MetricDeploymentDimension)
			}
			for _, dim := range set {
				if _, ok := doc[dim]; !ok {
					return nil, fmt.Errorf("emf: dimension %s has no member", dim)
				}
			}
		}
		for _, metric := range d.Metrics {
			if _, ok := doc[metric.Name]; !ok {
				return nil, fmt.Errorf("emf: metric %s has no member", metric.Name)
			}
			names = append(names, metric.Name)
		}
	}
	return names, nil
}

// Batch aggregates the counts of one invocation: every Add with the same
// dimension values and the same groups (dimension sets and metric names)
// is summed into one document, written by Flush. CloudWatch reads a
// document's metric value as one sample whose Sum is the value, so the
// dashboard's and alarms' Sum statistics are those of one line per event,
// for a fraction of the log bytes. A document holds one value per
// dimension, so a batch writes one document per distinct set of dimension
// values (a batch of polls that all left their change watching: one).
// Safe for concurrent use.
type Batch struct {
	mu    sync.Mutex
	docs  map[string]*batchDoc
	order []string
}

type batchDoc struct {
	values map[string]string
	groups []Group
}

// Add counts one line (as Writer.Emit would write it) into the batch.
func (b *Batch) Add(values map[string]string, groups ...Group) {
	key := batchKey(values, groups)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.docs == nil {
		b.docs = map[string]*batchDoc{}
	}
	d := b.docs[key]
	if d == nil {
		d = &batchDoc{values: make(map[string]string, len(values))}
		for k, v := range values {
			d.values[k] = v
		}
		for _, g := range groups {
			d.groups = append(d.groups, Group{Dimensions: g.Dimensions, Metrics: append([]Metric(nil), g.Metrics...)})
		}
		b.docs[key] = d
		b.order = append(b.order, key)
		return
	}
	for i, g := range groups {
		for j, m := range g.Metrics {
			d.groups[i].Metrics[j].Value += m.Value
		}
	}
}

// batchKey identifies the document a line is summed into: its dimension
// values, dimension sets and metric names (not the values).
func batchKey(values map[string]string, groups []Group) string {
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	sort.Strings(names)
	var sb strings.Builder
	for _, k := range names {
		fmt.Fprintf(&sb, "%q=%q;", k, values[k])
	}
	for _, g := range groups {
		fmt.Fprintf(&sb, "|%q:", g.Dimensions)
		for _, m := range g.Metrics {
			fmt.Fprintf(&sb, "%q,", m.Name)
		}
	}
	return sb.String()
}

// Lines are the batch's documents at timestampMS, in the order their
// first line was added, and empty the batch.
func (b *Batch) Lines(deployment string, timestampMS int64) [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := make([][]byte, 0, len(b.order))
	for _, key := range b.order {
		d := b.docs[key]
		lines = append(lines, Line(deployment, timestampMS, d.values, d.groups...))
	}
	b.docs, b.order = nil, nil
	return lines
}

type batchKeyType struct{}

// Scope returns ctx carrying a fresh Batch for Count, and the function
// that writes its documents (defer it: it runs on every return path,
// errors and panics included). When ctx already carries a Batch (a
// nested entry point of the same invocation) it returns ctx and a no-op,
// so the outermost scope writes once. A nil *Writer gives ctx and a no-op.
func (w *Writer) Scope(ctx context.Context) (context.Context, func()) {
	if w == nil || w.w == nil {
		return ctx, func() {}
	}
	if _, ok := ctx.Value(batchKeyType{}).(*Batch); ok {
		return ctx, func() {}
	}
	b := &Batch{}
	return context.WithValue(ctx, batchKeyType{}, b), func() { w.Flush(b) }
}

// Count adds one line to ctx's Batch (Scope); without one it writes the
// line at once (Emit).
func (w *Writer) Count(ctx context.Context, values map[string]string, groups ...Group) {
	if w == nil || w.w == nil {
		return
	}
	if b, ok := ctx.Value(batchKeyType{}).(*Batch); ok {
		b.Add(values, groups...)
		return
	}
	w.Emit(values, groups...)
}

// Flush writes b's documents, timestamped now, and empties b.
func (w *Writer) Flush(b *Batch) {
	if w == nil || w.w == nil || b == nil {
		return
	}
	lines := b.Lines(w.deployment, w.now().UnixMilli())
	if len(lines) == 0 {
		return
	}
	var buf []byte
	for _, l := range lines {
		buf = append(append(buf, l...), '\n')
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.w.Write(buf)
}

// level is the "level" of every EMF line (SetLevel).
var level atomic.Value

// SetLevel makes every later EMF line carry level, or INFO when level is
// below it (a DEBUG function's metric lines are INFO lines). Each main
// calls it with the log level its configuration loaded
// (envvar.Reader.LogLevel), before the first line.
func SetLevel(l slog.Level) {
	level.Store(lambdalog.LevelName(max(l, slog.LevelInfo)))
}

func lineLevel() string {
	if v, ok := level.Load().(string); ok {
		return v
	}
	return "INFO"
}
