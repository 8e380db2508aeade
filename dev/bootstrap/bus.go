package bootstrap

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/localeflow/localeflow/topology"
)

func applyBus(ctx context.Context, eb EventBridgeAPI, name string) (string, error) {
	out, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(name)})
	if err == nil && aws.ToString(out.EventBusArn) != "" {
		return aws.ToString(out.EventBusArn), nil
	}
	if err != nil && !hasCode(err, "ResourceAlreadyExistsException") {
		return "", fmt.Errorf("bootstrap: create event bus %s: %w", name, err)
	}
	got, err := eb.DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("bootstrap: describe event bus %s: %w", name, err)
	}
	return aws.ToString(got.Arn), nil
}

// applyRule puts the rule (PutRule is an upsert) and its single SQS target,
// identified by the target queue's logical name so that a re-run replaces
// rather than adds it.
func applyRule(ctx context.Context, eb EventBridgeAPI, bus string, r topology.Rule, q QueueResource) (RuleResource, error) {
	pattern, err := json.Marshal(r.EventPattern())
	if err != nil {
		return RuleResource{}, fmt.Errorf("bootstrap: encode pattern of rule %s: %w", r.Name, err)
	}
	out, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{
		Name:         aws.String(r.Name),
		EventBusName: aws.String(bus),
		EventPattern: aws.String(string(pattern)),
		State:        types.RuleStateEnabled,
	})
	if err != nil {
		return RuleResource{}, fmt.Errorf("bootstrap: put rule %s: %w", r.Name, err)
	}
	targets, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{
		Rule:         aws.String(r.Name),
		EventBusName: aws.String(bus),
		Targets:      []types.Target{{Id: aws.String(q.Logical), Arn: aws.String(q.ARN)}},
	})
	if err != nil {
		return RuleResource{}, fmt.Errorf("bootstrap: put target of rule %s: %w", r.Name, err)
	}
	if targets.FailedEntryCount > 0 {
		code := ""
		if len(targets.FailedEntries) > 0 {
			code = aws.ToString(targets.FailedEntries[0].ErrorCode)
		}
		return RuleResource{}, fmt.Errorf("bootstrap: put target of rule %s: %d failed (%s)", r.Name, targets.FailedEntryCount, code)
	}
	if err := removeOtherTargets(ctx, eb, bus, r.Name, q.Logical); err != nil {
		return RuleResource{}, err
	}
	return RuleResource{
		Name:        r.Name,
		ARN:         aws.ToString(out.RuleArn),
		DetailTypes: r.DetailTypes,
		TargetQueue: q.Logical,
		TargetARN:   q.ARN,
	}, nil
}

// removeOtherTargets deletes every target of the rule except keep, so that
// a rule re-applied on an existing stack delivers to its queue only.
func removeOtherTargets(ctx context.Context, eb EventBridgeAPI, bus, rule, keep string) error {
	list, err := eb.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String(rule), EventBusName: aws.String(bus)})
	if err != nil {
		return fmt.Errorf("bootstrap: list targets of rule %s: %w", rule, err)
	}
	var stale []string
	for _, t := range list.Targets {
		if id := aws.ToString(t.Id); id != keep {
			stale = append(stale, id)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	if _, err := eb.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(bus), Ids: stale}); err != nil {
		return fmt.Errorf("bootstrap: remove stale targets of rule %s: %w", rule, err)
	}
	return nil
}

func destroyRule(ctx context.Context, eb EventBridgeAPI, bus, name string) error {
	list, err := eb.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String(name), EventBusName: aws.String(bus)})
	if hasCode(err, "ResourceNotFoundException") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bootstrap: list targets of rule %s: %w", name, err)
	}
	if len(list.Targets) > 0 {
		ids := make([]string, 0, len(list.Targets))
		for _, t := range list.Targets {
			ids = append(ids, aws.ToString(t.Id))
		}
		_, err := eb.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(name), EventBusName: aws.String(bus), Ids: ids})
		if err != nil && !hasCode(err, "ResourceNotFoundException") {
			return fmt.Errorf("bootstrap: remove targets of rule %s: %w", name, err)
		}
	}
	_, err = eb.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(name), EventBusName: aws.String(bus)})
	if err != nil && !hasCode(err, "ResourceNotFoundException") {
		return fmt.Errorf("bootstrap: delete rule %s: %w", name, err)
	}
	return nil
}

func destroyBus(ctx context.Context, eb EventBridgeAPI, name string) error {
	_, err := eb.DeleteEventBus(ctx, &eventbridge.DeleteEventBusInput{Name: aws.String(name)})
	if err != nil && !hasCode(err, "ResourceNotFoundException") {
		return fmt.Errorf("bootstrap: delete event bus %s: %w", name, err)
	}
	return nil
}
