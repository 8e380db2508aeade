package eventbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/internal/xray"
)

// Error codes.
const (
	CodePublishFailed = "eventbus.publish_failed"
	CodeEntryFailed   = "eventbus.entry_failed"
	CodeDetailInvalid = "eventbus.detail_invalid"
)

// MaxDetailBytes is EventBridge's entry size limit (256 KiB) with room for
// the source, detail-type and bus name.
const MaxDetailBytes = 255 * 1024

// EventBridgeAPI is the one EventBridge method the publisher calls, with
// the SDK's exact signature.
type EventBridgeAPI interface {
	PutEvents(ctx context.Context, params *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

var _ EventBridgeAPI = (*eventbridge.Client)(nil)

// Publisher puts events on one bus.
type Publisher struct {
	client EventBridgeAPI
	bus    string
	// resources is the entries' `resources`: the deployment
	// discriminator (WithDeployment), else none.
	resources []string
}

// New returns a Publisher for busName (a name or ARN).
func New(client EventBridgeAPI, busName string) *Publisher {
	return &Publisher{client: client, bus: busName}
}

// WithDeployment returns a copy of p whose events carry
// contract.DeploymentResource(deployment) in their `resources`, so that
// consumers of a bus shared by several deployments can tell them apart
// (an additive envelope field: the detail is unchanged). The functions
// publish with their LOCALEFLOW_DEPLOYMENT.
func (p *Publisher) WithDeployment(deployment string) *Publisher {
	c := *p
	c.resources = []string{contract.DeploymentResource(deployment)}
	return &c
}

// Publish puts one event with source contract.EventSource, detailType and
// detail encoded as JSON.
func (p *Publisher) Publish(ctx context.Context, detailType string, detail any) error {
	if !core.ValidToken(detailType) {
		return core.Wrap(CodeDetailInvalid, false, errors.New("detail-type is not a token"))
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		return core.Wrap(CodeDetailInvalid, false, fmt.Errorf("encode %s detail: %w", detailType, err))
	}
	if len(raw) == 0 || raw[0] != '{' || len(raw) > MaxDetailBytes {
		return core.Wrap(CodeDetailInvalid, false, fmt.Errorf("%s detail must be a JSON object of at most %d bytes", detailType, MaxDetailBytes))
	}
	out, err := p.client.PutEvents(ctx, &eventbridge.PutEventsInput{
		Entries: []types.PutEventsRequestEntry{{
			EventBusName: aws.String(p.bus),
			Source:       aws.String(contract.EventSource),
			DetailType:   aws.String(detailType),
			Detail:       aws.String(string(raw)),
			Resources:    p.resources,
			// The invocation's X-Ray trace header: the rule target's
			// invocation (the consumer of an input, a team's consumer of
			// an output) continues this trace. nil without one.
			TraceHeader: traceHeader(ctx),
		}},
	})
	if err != nil {
		return core.Wrap(CodePublishFailed, true, fmt.Errorf("put %s event: %w", detailType, err))
	}
	if out.FailedEntryCount > 0 || (len(out.Entries) == 1 && out.Entries[0].ErrorCode != nil) {
		code := ""
		if len(out.Entries) == 1 && out.Entries[0].ErrorCode != nil {
			code = *out.Entries[0].ErrorCode
		}
		return core.Wrap(CodeEntryFailed, true, fmt.Errorf("put %s event: entry failed (%s)", detailType, code))
	}
	return nil
}

// Hint publishes a localeflow.change.hint for eventID of siteID (both
// tokens).
func (p *Publisher) Hint(ctx context.Context, eventID, siteID string) error {
	if !core.ValidToken(eventID) || !core.ValidToken(siteID) {
		return core.Wrap(CodeDetailInvalid, false, errors.New("hint event_id and site_id must be tokens"))
	}
	return p.Publish(ctx, contract.DetailChangeHint, contract.ChangeHint{EventID: eventID, SiteID: siteID})
}

func traceHeader(ctx context.Context) *string {
	if h := xray.HeaderOf(ctx); h != "" {
		return aws.String(h)
	}
	return nil
}
