package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/localeflow/localeflow/dev/bootstrap"
	"github.com/localeflow/localeflow/topology"
)

// Options tune a Stack.
type Options struct {
	Region  string
	Account string
	// Speedup divides every schedule's rate (12 fires a 1-minute schedule
	// every 5 s); values below 1 mean 1.
	Speedup float64
	// MinEvery is the shortest schedule interval after the speedup
	// (default 1 s).
	MinEvery time.Duration
	// VisibilityTimeout overrides the queues' visibility timeout on receive
	// (0 keeps the queue's, as AWS does); see Mapping.VisibilityTimeout.
	VisibilityTimeout time.Duration
	// Idle is the mappings' sleep after an empty receive.
	Idle    time.Duration
	Log     *slog.Logger
	OnBatch func(BatchResult)
}

// Stack is every mapping and schedule of a topology whose function has an
// invoker.
type Stack struct {
	Mappings  []*Mapping
	Schedules []*Schedule
	// Missing lists the functions of the topology without an invoker: their
	// mappings and schedules are not played.
	Missing []string
}

// FromTopology builds the event source mappings (one per function with a
// queue) and the schedules of topo. invokers is keyed by the function's
// directory name (topology.Function.Dir: "poller", "coordinator",
// "health").
func FromTopology(topo topology.Topology, res bootstrap.Resources, sqsAPI SQSAPI, invokers map[string]Invoker, o Options) (Stack, error) {
	if sqsAPI == nil {
		return Stack{}, errors.New("runner: FromTopology needs an SQS client")
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.Account == "" {
		o.Account = "000000000000"
	}
	speed := max(o.Speedup, 1)
	minEvery := o.MinEvery
	if minEvery <= 0 {
		minEvery = time.Second
	}
	var st Stack
	for _, fn := range topo.Functions {
		inv, ok := invokers[fn.Dir]
		if !ok || inv == nil {
			st.Missing = append(st.Missing, fn.Dir)
			continue
		}
		timeout := time.Duration(fn.TimeoutSeconds) * time.Second
		if fn.Queue != "" {
			q, ok := topo.QueueByLogical(fn.Queue)
			qr, ok2 := res.Queue(fn.Queue)
			if !ok || !ok2 || qr.URL == "" {
				return Stack{}, fmt.Errorf("runner: function %s consumes unknown queue %q", fn.Name, fn.Queue)
			}
			st.Mappings = append(st.Mappings, &Mapping{
				Function: fn.Name, SQS: sqsAPI, QueueURL: qr.URL, QueueARN: qr.ARN, Region: o.Region,
				BatchSize: q.BatchSize, Timeout: timeout, VisibilityTimeout: o.VisibilityTimeout,
				Idle: o.Idle, Invoker: inv, Log: o.Log, OnBatch: o.OnBatch,
			})
		}
		for _, s := range topo.Schedules {
			if s.Function != fn.Dir {
				continue
			}
			every := max(time.Duration(float64(time.Duration(s.RateMinutes)*time.Minute)/speed), minEvery)
			st.Schedules = append(st.Schedules, &Schedule{
				Name: s.Name, RuleARN: fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", o.Region, o.Account, s.Name),
				Account: o.Account, Region: o.Region, Every: every, Invoker: inv, Timeout: timeout, Log: o.Log,
			})
		}
	}
	return st, nil
}

// Run plays every mapping and schedule until ctx ends.
func (s Stack) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(s.Mappings)+len(s.Schedules))
	for i, m := range s.Mappings {
		wg.Go(func() { errs[i] = m.Run(ctx) })
	}
	for i, sc := range s.Schedules {
		wg.Go(func() { errs[len(s.Mappings)+i] = sc.Run(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
