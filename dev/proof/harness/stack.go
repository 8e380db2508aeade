package harness

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/dev/bootstrap"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/dev/proof/faultinject"
	"github.com/localeflow/localeflow/dev/proof/invariant"
	"github.com/localeflow/localeflow/dev/proof/meter"
	"github.com/localeflow/localeflow/topology"
)

// Stack is one fresh topology on the local stack with metered clients.
type Stack struct {
	Topology  topology.Topology
	Resources bootstrap.Resources
	// Meter counts every call of DB, SQS and EventBridge.
	Meter *meter.Meter
	// Faults is installed on DB (disabled until the test enables it).
	Faults *faultinject.Injector
	// DB is the metered, fault-injectable DynamoDB client the functions
	// use; Audit a clean one for checks and setup.
	DB    *dynamodb.Client
	Audit *dynamodb.Client
	SQS   *sqs.Client
	EB    *eventbridge.Client

	cfg aws.Config
}

// NewStack creates every resource under a unique prefix (deleted when t
// ends) and the clients. The injector starts disabled, with the DynamoDB
// throttling and 5xx faults and the given seed.
func NewStack(t testing.TB, seed uint64) *Stack {
	t.Helper()
	localtest.Require(t)
	topo, res := localtest.Stack(t)
	cfg := localtest.Config(t)
	s := &Stack{
		Topology: topo, Resources: res, Meter: meter.New(), cfg: cfg,
		Faults: faultinject.New(seed, faultinject.ProvisionedThroughputExceeded, faultinject.Throttling,
			faultinject.InternalServerError, faultinject.ServiceUnavailable),
	}
	s.Faults.Enable(false)
	s.DB = awsclient.DynamoDB(cfg, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, s.Faults.Install, s.Meter.Install)
	})
	s.Audit = awsclient.DynamoDB(cfg)
	s.SQS = awsclient.SQS(cfg, func(o *sqs.Options) { o.APIOptions = append(o.APIOptions, s.Meter.Install) })
	s.EB = awsclient.EventBridge(cfg, func(o *eventbridge.Options) { o.APIOptions = append(o.APIOptions, s.Meter.Install) })
	return s
}

// Clients are the AWS clients of one function, counted by one meter.
type Clients struct {
	DB  *dynamodb.Client
	SQS *sqs.Client
	EB  *eventbridge.Client
}

// MeteredClients returns clients on the stack counted by m instead of the
// stack's Meter (without fault injection): what they do is counted apart.
func (s *Stack) MeteredClients(m *meter.Meter) Clients {
	return Clients{
		DB:  awsclient.DynamoDB(s.cfg, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, m.Install) }),
		SQS: awsclient.SQS(s.cfg, func(o *sqs.Options) { o.APIOptions = append(o.APIOptions, m.Install) }),
		EB:  awsclient.EventBridge(s.cfg, func(o *eventbridge.Options) { o.APIOptions = append(o.APIOptions, m.Install) }),
	}
}

// Check runs the invariant checker on both tables with the clean client.
func (s *Stack) Check(t testing.TB, o invariant.Options) invariant.Report {
	t.Helper()
	o.DB = s.Audit
	o.MonitorTable, o.ReleaseTable = s.Resources.MonitorTable, s.Resources.ReleaseTable
	return invariant.RequireClean(t, o)
}

// Eventually polls cond every 50 ms until it holds or timeout passes.
func Eventually(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return cond()
}

// QueueDepth is the approximate number of visible + in-flight + delayed
// messages of a queue.
func (s *Stack) QueueDepth(ctx context.Context, url string) (int, error) {
	out, err := s.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range out.Attributes {
		var x int
		for _, ch := range v {
			if ch >= '0' && ch <= '9' {
				x = x*10 + int(ch-'0')
			}
		}
		n += x
	}
	return n, nil
}
