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
}

// New returns a Publisher for busName (a name or ARN).
func New(client EventBridgeAPI, busName string) *Publisher {
	return &Publisher{client: client, bus: busName}
}

// Publish puts one event with source "localeflow", detailType and detail
// encoded as JSON.
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

// ChangeTerminal is the detail of localeflow.change.terminal: a monitored
// change reached terminal (the CMS's final status) or failed (monitoring
// gave up). Every key is always present; absent values are null. The event
// is published at least once: consumers dedupe on OutcomeID.
type ChangeTerminal struct {
	EventID string `json:"event_id"`
	// OutcomeID is stable across re-publishes of one outcome (SHA-256 hex
	// of the event id, the final state and the finishing write's time).
	OutcomeID string `json:"outcome_id"`
	// SiteID and PlanID are null only for a record that failed validation
	// (error_code lifecycle_monitor.state_invalid): its stored identity is
	// not trusted.
	SiteID *string `json:"site_id"`
	PlanID *string `json:"plan_id"`
	// State is the monitor state: "terminal" or "failed".
	State string `json:"state"`
	// RemoteStatus is the CMS status last seen (null before any poll).
	RemoteStatus *string `json:"remote_status"`
	// ErrorCode is the stable code of a failed item.
	ErrorCode *string `json:"error_code"`
	// LifecycleSHA256 hashes the stored lifecycle snapshot.
	LifecycleSHA256 *string `json:"lifecycle_sha256"`
}

// ChangeHint is the detail of localeflow.change.hint: a CMS saying that
// the lifecycle status of one change changed. It carries no status: the
// poller answers it with its normal signed poll.
type ChangeHint struct {
	EventID string `json:"event_id"`
	SiteID  string `json:"site_id"`
}

// Hint publishes a localeflow.change.hint for eventID of siteID (both
// tokens).
func (p *Publisher) Hint(ctx context.Context, eventID, siteID string) error {
	if !core.ValidToken(eventID) || !core.ValidToken(siteID) {
		return core.Wrap(CodeDetailInvalid, false, errors.New("hint event_id and site_id must be tokens"))
	}
	return p.Publish(ctx, contract.DetailChangeHint, ChangeHint{EventID: eventID, SiteID: siteID})
}
