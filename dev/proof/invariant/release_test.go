package invariant_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/proof/harness"
	"github.com/localeflow/localeflow/dev/proof/invariant"
)

// deliveredRelease runs one two-locale release to delivered with the real
// coordinator and returns the stack, servers and plan.
func deliveredRelease(t *testing.T) (*harness.Stack, *harness.ReleaseServers, releasetest.PlanSpec) {
	t.Helper()
	stack := harness.NewStack(t, 2)
	clock := harness.NewClock(1)
	srv := harness.NewReleaseServers(t, clock)
	c := stack.NewCoordinator(t, srv, clock, "checker", nil).Coordinator
	plan := releasetest.NewPlan("evt-checker-release", "de-DE", "fr-FR")
	ctx := context.Background()
	if _, _, err := c.Ingest(ctx, contract.DetailPlanAccepted, srv.Fixture.Detail(plan.PlanPayload())); err != nil {
		t.Fatal(err)
	}
	for _, j := range plan.Jobs {
		if _, _, err := c.Ingest(ctx, contract.DetailJobCompleted, srv.Fixture.Detail(plan.ResultPayload(j.TargetLocale, releasetest.ResultOptions{}))); err != nil {
			t.Fatal(err)
		}
	}
	for step := 0; step < 10; step++ {
		out, err := harness.Step(ctx, c, plan.EventID)
		if err != nil {
			t.Fatal(err)
		}
		if out.Status == release.OutcomeDeliveryReady {
			break
		}
	}
	if out, err := c.Deliver(ctx, plan.EventID); err != nil || out.Status != release.OutcomeDelivered {
		t.Fatalf("deliver: %+v %v", out, err)
	}
	return stack, srv, plan
}

func rules(rep invariant.Report) map[string]bool {
	out := map[string]bool{}
	for _, v := range rep.Violations {
		out[v.Rule] = true
	}
	return out
}

// TestCheckerReleaseRules: a delivered release is clean; each broken rule
// (a second delivery at the CMS, a delivery the CMS never got, an evidence
// binding changed, a text copied into a content-free record) is reported.
func TestCheckerReleaseRules(t *testing.T) {
	stack, srv, plan := deliveredRelease(t)
	ctx := context.Background()
	texts := harness.ReleaseTexts(plan)
	approval, _ := srv.Fixture.Authorities()
	check := func(delivered map[string][]string) invariant.Report {
		t.Helper()
		rep, err := invariant.Check(ctx, invariant.Options{DB: stack.Audit, ReleaseTable: stack.Resources.ReleaseTable, Texts: texts,
			Delivered: delivered, ApprovalKey: approval.PublicKey()})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	delivered := srv.Delivered()
	t.Run("clean", func(t *testing.T) {
		rep := check(delivered)
		if len(rep.Violations) != 0 || rep.DeliveryStates[release.StateSucceeded] != 1 || rep.ReleaseItems < 10 {
			t.Fatalf("violations %v, deliveries %v, items %d", rep.Violations, rep.DeliveryStates, rep.ReleaseItems)
		}
	})
	t.Run("delivered twice", func(t *testing.T) {
		twice := map[string][]string{plan.EventID: {delivered[plan.EventID][0], "dlv-other"}}
		if r := rules(check(twice)); !r[invariant.RuleDeliveredTwice] || !r[invariant.RuleDeliveryUnknown] {
			t.Fatalf("rules %v", r)
		}
	})
	t.Run("delivery lost", func(t *testing.T) {
		if r := rules(check(map[string][]string{})); !r[invariant.RuleDeliveryLost] {
			t.Fatalf("rules %v", r)
		}
	})
	t.Run("blocked release that still wakes", func(t *testing.T) {
		store := releasedb.New(stack.Audit, stack.Resources.ReleaseTable)
		blocked := &release.BlockedRecord{EventID: plan.EventID, Code: release.CodeAttemptsExhausted, BlockedMS: 1_764_460_800_000, Version: 1}
		if err := store.Put(ctx, blocked, 0); err != nil {
			t.Fatal(err)
		}
		if r := rules(check(delivered)); len(r) != 0 {
			t.Fatalf("a blocked release with nothing waking: rules %v", r)
		}
		snap, err := store.Load(ctx, plan.EventID)
		if err != nil {
			t.Fatal(err)
		}
		job := *snap.Jobs[plan.Jobs[0].JobID]
		job.AwaitingClaim, job.Version = true, job.Version+1
		if err := store.Put(ctx, &job, job.Version-1); err != nil {
			t.Fatal(err)
		}
		if r := rules(check(delivered)); !r[invariant.RuleBlockedWakes] {
			t.Fatalf("rules %v", r)
		}
		job.AwaitingClaim, job.Version = false, job.Version+1
		if err := store.Put(ctx, &job, job.Version-1); err != nil {
			t.Fatal(err)
		}
	})
	// Break the stored records.
	out, err := stack.Audit.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(stack.Resources.ReleaseTable),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "event#" + plan.EventID}}})
	if err != nil {
		t.Fatal(err)
	}
	broke := 0
	for _, it := range out.Items {
		sk := it["sk"].(*types.AttributeValueMemberS).Value
		switch {
		case strings.HasPrefix(sk, release.SKEvidencePrefix) && broke&1 == 0:
			it["evidence_revision"] = &types.AttributeValueMemberS{Value: "rev-forged"}
			broke |= 1
		case strings.HasPrefix(sk, release.SKApprovalPrefix) && broke&2 == 0:
			it["note"] = &types.AttributeValueMemberS{Value: texts[0]}
			it["expires_ms"] = &types.AttributeValueMemberN{Value: "99999999999999"}
			if body, ok := it["body"].(*types.AttributeValueMemberS); ok {
				// A compact approval (docs/design.md "Compact approvals"):
				// the signed body altered the same way, so the row still
				// reads and its signature no longer verifies.
				var p map[string]any
				if err := json.Unmarshal([]byte(body.Value), &p); err != nil {
					t.Fatal(err)
				}
				p["expires_at_ms"] = int64(99999999999999)
				raw, err := json.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				it["body"] = &types.AttributeValueMemberS{Value: string(raw)}
			}
			broke |= 2
		default:
			continue
		}
		if _, err := stack.Audit.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(stack.Resources.ReleaseTable), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	if broke != 3 {
		t.Fatalf("records to break not found (%b)", broke)
	}
	t.Run("binding, content and approval signature", func(t *testing.T) {
		if r := rules(check(delivered)); !r[invariant.RuleEvidenceBinding] || !r[invariant.RuleContentFree] || !r[invariant.RuleApprovalSignature] {
			t.Fatalf("rules %v", r)
		}
	})
}
