package cost

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/proof/harness"
)

// leasedItemReader reads the raw monitor item (with the unmetered client)
// each time the poller asks the CMS, that is while the poll holds its
// lease, before delegating the request.
type leasedItemReader struct {
	monitor.LifecycleReader
	read func(context.Context) map[string]types.AttributeValue
	mu   sync.Mutex
	last map[string]types.AttributeValue
}

func (r *leasedItemReader) ReadLifecycle(ctx context.Context, target lifecycle.Target) (lifecycle.Response, error) {
	it := r.read(ctx)
	r.mu.Lock()
	r.last = it
	r.mu.Unlock()
	return r.LifecycleReader.ReadLifecycle(ctx, target)
}

// breakdown lists the attributes of it, largest first, as name=bytes.
func breakdown(it map[string]types.AttributeValue) string {
	names := make([]string, 0, len(it))
	size := func(n string) int { return monitordb.ItemSize(map[string]types.AttributeValue{n: it[n]}) }
	for n := range it {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return size(names[i]) > size(names[j]) })
	parts := make([]string, 0, 5)
	for _, n := range names[:min(5, len(names))] {
		parts = append(parts, fmt.Sprintf("%s=%d", n, size(n)))
	}
	return strings.Join(parts, " ")
}

// TestCostWorkloadItemStaysUnderOneKilobyte polls one change of
// BenchmarkMonitorCost's workload (9 × processing, then published) on
// DynamoDB Local. From the second poll on the item carries the lifecycle
// snapshot and a growing timeline; it must stay under 1 KB both while
// leased (the claim's after image, the finishing write's before image)
// and after the finishing write, by DynamoDB's size rule, and each poll
// must consume exactly 2 table write units (claim + finishing write), as
// DynamoDB Local reports them.
func TestCostWorkloadItemStaysUnderOneKilobyte(t *testing.T) {
	const polls = 10
	stack := harness.NewStack(t, 1)
	life := harness.NewLifecycle(t)
	clock := harness.NewClock(1)
	cfg := harness.FastMonitor("cost-0", time.Second, 5)
	p := stack.NewPoller(t, life, clock, cfg, nil)
	ctx := context.Background()
	id := "evt-cost-0-00000"
	life.PutChange(id, append(cmstest.Repeat(cmstest.StatusStep("processing"), polls-1), cmstest.StatusStep("published"))...)
	if err := p.Register(ctx, id); err != nil {
		t.Fatal(err)
	}
	raw := func(ctx context.Context) map[string]types.AttributeValue {
		out, err := stack.Audit.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(stack.Resources.MonitorTable),
			Key: map[string]types.AttributeValue{"event_id": &types.AttributeValueMemberS{Value: id}}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Error(err)
			return nil
		}
		return out.Item
	}
	reader := &leasedItemReader{LifecycleReader: p.Reader, read: raw}
	t.Logf("registered: %d bytes", monitordb.ItemSize(raw(ctx)))
	for poll := 1; poll <= polls; poll++ {
		clock.Step(cfg.PollInterval + time.Millisecond)
		stack.Meter.Reset()
		out, err := p.Service.PollOnce(ctx, id, reader)
		if err != nil || !out.Polled {
			t.Fatalf("poll %d: %+v, %v", poll, out, err)
		}
		snap := stack.Meter.Snapshot()
		leased, after := reader.last, raw(ctx)
		t.Logf("poll %d: leased %d bytes, after %d bytes (%s); table write units %.1f, index %.1f",
			poll, monitordb.ItemSize(leased), monitordb.ItemSize(after), breakdown(after), snap.WriteUnits-snap.IndexUnits, snap.IndexUnits)
		if poll < 2 {
			continue
		}
		if n := monitordb.ItemSize(leased); n >= 1024 {
			t.Errorf("poll %d: leased item is %d bytes, want < 1024 (%s)", poll, n, breakdown(leased))
		}
		if n := monitordb.ItemSize(after); n >= 1024 {
			t.Errorf("poll %d: item after the finishing write is %d bytes, want < 1024 (%s)", poll, n, breakdown(after))
		}
		if u := snap.WriteUnits - snap.IndexUnits; u != 2 {
			t.Errorf("poll %d: %.1f table write units, want 2 (claim + finishing write, 1 each)", poll, u)
		}
	}
}
