package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/topology"
)

// EventBridgeAPI is the part of *eventbridge.Client `replay` uses.
type EventBridgeAPI interface {
	DescribeArchive(ctx context.Context, params *eventbridge.DescribeArchiveInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DescribeArchiveOutput, error)
	DescribeRule(ctx context.Context, params *eventbridge.DescribeRuleInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DescribeRuleOutput, error)
	StartReplay(ctx context.Context, params *eventbridge.StartReplayInput, optFns ...func(*eventbridge.Options)) (*eventbridge.StartReplayOutput, error)
}

var _ EventBridgeAPI = (*eventbridge.Client)(nil)

// newEventBridgeAPI returns the EventBridge client of `replay` (tests
// replace it).
var newEventBridgeAPI = func(ctx context.Context) (EventBridgeAPI, error) {
	cfg, err := loadAWSFromContext(ctx)
	if err != nil {
		return nil, err
	}
	return awsclient.EventBridge(cfg), nil
}

// codeReplayWindow: the window is empty, in the future, or older than the
// archive keeps.
const codeReplayWindow = "cli.replay.window_invalid"

// replayArgs are the checked arguments of `replay`.
type replayArgs struct {
	from, to time.Time
	rules    []topology.Rule
}

// checkReplay validates --from, --to and --detail-type against now and
// the topology: RFC 3339 times, from < to ≤ now, from within the
// archive's retention; the detail-type one the rules route.
func (c *cli) checkReplay(topo topology.Topology, now time.Time) (replayArgs, error) {
	var a replayArgs
	var err error
	if a.from, err = time.Parse(time.RFC3339, c.replayFrom); err != nil {
		return a, usagef("replay: --from must be an RFC 3339 time (2026-12-01T08:00:00Z)")
	}
	if a.to, err = time.Parse(time.RFC3339, c.replayTo); err != nil {
		return a, usagef("replay: --to must be an RFC 3339 time (2026-12-01T12:00:00Z)")
	}
	oldest := now.Add(-time.Duration(topo.Archive.RetentionDays) * 24 * time.Hour)
	switch {
	case !a.from.Before(a.to):
		return a, core.Wrap(codeReplayWindow, false, fmt.Errorf("--from %s is not before --to %s", c.replayFrom, c.replayTo))
	case a.to.After(now):
		return a, core.Wrap(codeReplayWindow, false, fmt.Errorf("--to %s is in the future", c.replayTo))
	case a.from.Before(oldest):
		return a, core.Wrap(codeReplayWindow, false, fmt.Errorf("--from %s is older than the archive keeps (%d days)", c.replayFrom, topo.Archive.RetentionDays))
	}
	a.rules = topo.Rules
	if c.replayDetailType != "" {
		if a.rules = topo.RulesFor(c.replayDetailType); len(a.rules) == 0 {
			return a, usagef("replay: --detail-type must be an input detail-type (%s)", strings.Join(topo.InputDetailTypes(), ", "))
		}
	}
	return a, nil
}

// replay starts an EventBridge replay of the deployment's archive window
// to the bus the archive keeps the events of (its own bus, or the host
// bus it was deployed on), limited to the deployment's rules that route
// the detail-type (every input rule without one). A bus named by --bus
// (or, without --prefix, $LOCALEFLOW_EVENT_BUS) must be that bus.
func (c *cli) replay(ctx context.Context, now time.Time) error {
	prefix, err := c.deploymentPrefix(true)
	if err != nil {
		return err
	}
	topo := topology.New(prefix)
	a, err := c.checkReplay(topo, now)
	if err != nil {
		return err
	}
	named, namedBy := c.busName, "--bus"
	if named == "" && c.prefix == "" {
		named, namedBy = strings.TrimSpace(c.getenv(contract.EnvEventBus)), contract.EnvEventBus
	}
	eb, err := newEventBridgeAPI(ctx)
	if err != nil {
		return err
	}
	arch, err := eb.DescribeArchive(ctx, &eventbridge.DescribeArchiveInput{ArchiveName: aws.String(topo.Archive.Name)})
	if err != nil {
		return core.Wrap(codeRuntime, true, fmt.Errorf("archive %s: %w", topo.Archive.Name, err))
	}
	busARN, archiveARN := aws.ToString(arch.EventSourceArn), aws.ToString(arch.ArchiveArn)
	i := strings.LastIndex(busARN, ":event-bus/")
	if i < 0 || archiveARN == "" {
		return core.Wrap(codeRuntime, false, fmt.Errorf("archive %s: source %q is not an event bus ARN", topo.Archive.Name, busARN))
	}
	bus := busARN[i+len(":event-bus/"):]
	if named != "" && named != bus && named != busARN {
		return core.Wrap(codeDeploymentAmbiguous, false, fmt.Errorf("%s names bus %s, but deployment %s's archive %s keeps the events of bus %s", namedBy, named, prefix, topo.Archive.Name, bus))
	}
	var filters []string
	for _, r := range a.rules {
		out, err := eb.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(r.Name), EventBusName: aws.String(bus)})
		if err != nil {
			return core.Wrap(codeRuntime, true, fmt.Errorf("rule %s on bus %s: %w", r.Name, bus, err))
		}
		filters = append(filters, aws.ToString(out.Arn))
	}
	name := fmt.Sprintf("%s-replay-%s", topo.Prefix, now.UTC().Format("20060102T150405"))
	out, err := eb.StartReplay(ctx, &eventbridge.StartReplayInput{
		ReplayName: aws.String(name), EventSourceArn: aws.String(archiveARN),
		EventStartTime: aws.Time(a.from), EventEndTime: aws.Time(a.to),
		Destination: &types.ReplayDestination{Arn: aws.String(busARN), FilterArns: filters},
		Description: aws.String("localeflow replay " + c.replayFrom + " .. " + c.replayTo),
	})
	if err != nil {
		return core.Wrap(codeRuntime, true, fmt.Errorf("start replay %s: %w", name, err))
	}
	if c.jsonOut {
		return c.printJSON(map[string]any{"replay_name": name, "state": string(out.State), "archive_arn": archiveARN, "bus_arn": busARN, "rule_arns": filters})
	}
	fmt.Fprintf(c.out, "replay %s %s: %s .. %s from %s to %s (rules: %s)\n", name, out.State, a.from.UTC().Format(time.RFC3339),
		a.to.UTC().Format(time.RFC3339), archiveARN, busARN, strings.Join(filters, ", "))
	fmt.Fprintf(c.out, "follow it: aws events describe-replay --replay-name %s\n", name)
	return nil
}
