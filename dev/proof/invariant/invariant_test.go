package invariant_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/proof/harness"
	"github.com/localeflow/localeflow/dev/proof/invariant"
	"github.com/localeflow/localeflow/topology"
)

func n(v int64) types.AttributeValue  { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }
func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// TestCheckerFindsEachBrokenMonitorRule registers valid changes, breaks one
// rule on each through raw writes, and expects exactly that rule (and no
// violation on the untouched change).
func TestCheckerFindsEachBrokenMonitorRule(t *testing.T) {
	stack := harness.NewStack(t, 1)
	life := harness.NewLifecycle(t)
	p := stack.NewPoller(t, life, harness.NewClock(1), harness.FastMonitor("checker", time.Second, 5), nil)
	ctx := context.Background()
	table := stack.Resources.MonitorTable
	cases := []struct {
		id   string
		set  map[string]types.AttributeValue
		drop []string
		rule string
	}{
		{id: "evt-clean"},
		{id: "evt-lease-fields", set: map[string]types.AttributeValue{"lease_token": s("tok")}, rule: invariant.RuleMonitorInvalid},
		{id: "evt-wake-ms", set: map[string]types.AttributeValue{topology.AttrWakeMS: n(1)}, rule: invariant.RuleWakeKeys},
		{id: "evt-final-wakes", set: map[string]types.AttributeValue{"state": s("terminal"), "remote_status": s("cancelled")}, rule: invariant.RuleFinalWakes},
		{id: "evt-no-wake", drop: []string{topology.AttrWakeShard, topology.AttrWakeMS}, rule: invariant.RuleWakeKeys},
		{id: "evt-attention", set: map[string]types.AttributeValue{topology.AttrAttentionShard: n(0), topology.AttrAttentionMS: n(1)}, rule: invariant.RuleAttentionKeys},
		{id: "evt-outbox-open", set: map[string]types.AttributeValue{topology.AttrOutboxShard: n(0), topology.AttrOutboxMS: n(1)}, rule: invariant.RuleOutboxKeys},
		{id: "evt-attempts", set: map[string]types.AttributeValue{"consecutive_failures": n(9)}, rule: invariant.RuleAttempts},
		{id: "evt-text", set: map[string]types.AttributeValue{"note": s("copy: " + harness.ChangeText("evt-text"))}, rule: invariant.RuleContentFree},
		{id: "evt-binding", set: map[string]types.AttributeValue{"binding_sha256": s(fmt.Sprintf("%064d", 7))}, rule: invariant.RuleMonitorInvalid},
	}
	var texts []string
	for _, c := range cases {
		if err := p.Register(ctx, c.id); err != nil {
			t.Fatal(err)
		}
		texts = append(texts, harness.ChangeText(c.id))
		if c.set == nil && c.drop == nil {
			continue
		}
		item, err := stack.Audit.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"event_id": s(c.id)}})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range c.set {
			item.Item[k] = v
		}
		for _, k := range c.drop {
			delete(item.Item, k)
		}
		if _, err := stack.Audit.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item.Item}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := invariant.Check(ctx, invariant.Options{DB: stack.Audit, MonitorTable: table, Texts: texts})
	if err != nil {
		t.Fatal(err)
	}
	if rep.MonitorItems != len(cases) {
		t.Fatalf("checked %d items, want %d", rep.MonitorItems, len(cases))
	}
	found := map[string]map[string]bool{}
	for _, v := range rep.Violations {
		if found[v.Key] == nil {
			found[v.Key] = map[string]bool{}
		}
		found[v.Key][v.Rule] = true
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			if c.rule == "" {
				if len(found[c.id]) != 0 {
					t.Fatalf("clean record reported: %v", found[c.id])
				}
				return
			}
			if !found[c.id][c.rule] {
				t.Fatalf("rule %s not reported; got %v", c.rule, found[c.id])
			}
		})
	}
	// The untouched record really was read through the monitor's store.
	rec, err := p.Store.Get(ctx, "evt-clean")
	if err != nil || rec.State != monitor.StatePending || rec.EventID != "evt-clean" {
		t.Fatalf("clean record %+v %v", rec, err)
	}
}

// TestCheckerFindsOutcomesNeverAnnounced: a final record still in the
// outbox is reported when every outcome must have been announced, and no
// longer once it was.
func TestCheckerFindsOutcomesNeverAnnounced(t *testing.T) {
	stack := harness.NewStack(t, 1)
	life := harness.NewLifecycle(t)
	p := stack.NewPoller(t, life, harness.NewClock(1), harness.FastMonitor("checker", time.Second, 5), nil)
	ctx := context.Background()
	life.PutChange("evt-owed", cmstest.StatusStep("published"))
	if err := p.Register(ctx, "evt-owed"); err != nil {
		t.Fatal(err)
	}
	out, err := p.Service.PollOnce(ctx, "evt-owed", p.Reader)
	if err != nil || out.Owed == nil {
		t.Fatalf("poll = %+v, %v", out, err)
	}
	opts := invariant.Options{DB: stack.Audit, MonitorTable: stack.Resources.MonitorTable, OutcomesAnnounced: true}
	rep, err := invariant.Check(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) != 1 || rep.Violations[0].Rule != invariant.RuleOutcomeOwed {
		t.Fatalf("violations %v, want one %s", rep.Violations, invariant.RuleOutcomeOwed)
	}
	if err := p.Service.Announced(ctx, *out.Owed); err != nil {
		t.Fatal(err)
	}
	if rep, err = invariant.Check(ctx, opts); err != nil || len(rep.Violations) != 0 {
		t.Fatalf("after Announced: %v, %v", rep.Violations, err)
	}
}
