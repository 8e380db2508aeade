package monitordb

import (
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/topology"
)

// Attribute names of a monitor item.
const (
	attrEventID         = topology.AttrEventID
	attrSchemaVersion   = "schema_version"
	attrSiteID          = "site_id"
	attrPlanID          = "plan_id"
	attrWebsiteVersion  = "website_version"
	attrSourceSequence  = "source_sequence"
	attrJobCount        = "job_count"
	attrChangeSHA256    = "change_sha256"
	attrBindingSHA256   = "binding_sha256"
	attrState           = "state"
	attrPollAttempts    = "poll_attempts"
	attrFailures        = "consecutive_failures"
	attrMaxFailures     = "max_consecutive_failures"
	attrNextPollMS      = "next_poll_ms"
	attrLeaseOwner      = "lease_owner"
	attrLeaseToken      = "lease_token"
	attrLeaseExpiresMS  = "lease_expires_ms"
	attrLastErrorCode   = "last_error_code"
	attrRemoteStatus    = "remote_status"
	attrLifecycleSHA256 = "lifecycle_sha256"
	attrLifecycle       = "lifecycle"
	attrCreatedMS       = "created_ms"
	attrUpdatedMS       = "updated_ms"
	attrHintMS          = "hint_ms"
	attrRegularPollMS   = "regular_poll_ms"
	attrWaitUntilMS     = "wait_until_ms"
	attrWakeShard       = topology.AttrWakeShard
	attrWakeMS          = topology.AttrWakeMS
	attrAttentionShard  = topology.AttrAttentionShard
	attrAttentionMS     = topology.AttrAttentionMS
	attrOutboxMS        = topology.AttrOutboxMS
)

// AttrExpiresAt is the monitor table's TTL attribute (epoch seconds), set
// only on finished records that need no attention.
const AttrExpiresAt = topology.AttrExpiresAt

// ExpiresAt is the expires_at of a record finished at updatedMS.
func ExpiresAt(updatedMS int64, retention time.Duration) int64 {
	return (updatedMS + retention.Milliseconds()) / 1000
}

// AttrTimeline holds a record's last transitions compactly:
// "at_ms,state,remote_status,code" per transition (empty fields for none),
// joined by ";", oldest first — at most monitor.TimelineMax entries, a few
// hundred bytes, so the hot item stays small.
const AttrTimeline = "timeline"

// EncodeTimeline is the stored form of t ("" when empty).
func EncodeTimeline(t []monitor.TimelineEntry) string {
	parts := make([]string, 0, len(t))
	for _, e := range t {
		parts = append(parts, strconv.FormatInt(e.AtMS, 10)+","+string(e.State)+","+e.RemoteStatus+","+e.Code)
	}
	return strings.Join(parts, ";")
}

// decodeTimeline parses the stored form; ok is false when it is malformed
// or an entry is not valid.
func decodeTimeline(s string) ([]monitor.TimelineEntry, bool) {
	var out []monitor.TimelineEntry
	for _, part := range strings.Split(s, ";") {
		f := strings.Split(part, ",")
		if len(f) != 4 {
			return nil, false
		}
		at, err := strconv.ParseInt(f[0], 10, 64)
		e := monitor.TimelineEntry{AtMS: at, State: monitor.State(f[1]), RemoteStatus: f[2], Code: f[3]}
		if err != nil || !e.Valid() {
			return nil, false
		}
		out = append(out, e)
	}
	return out, len(out) <= monitor.TimelineMax
}

// AttrAcknowledgedMS is the attribute an acknowledgement sets on a record
// that needed attention (when, in epoch ms).
const AttrAcknowledgedMS = "acknowledged_ms"

// item is the stored form. Optional attributes are omitted when empty. The
// lifecycle snapshot is not here: encode and decode handle it (snapshot.go).
type item struct {
	EventID                string `dynamodbav:"event_id"`
	SchemaVersion          int    `dynamodbav:"schema_version"`
	SiteID                 string `dynamodbav:"site_id"`
	PlanID                 string `dynamodbav:"plan_id"`
	WebsiteVersion         string `dynamodbav:"website_version"`
	SourceSequence         int64  `dynamodbav:"source_sequence"`
	JobCount               int    `dynamodbav:"job_count"`
	ChangeSHA256           string `dynamodbav:"change_sha256"`
	BindingSHA256          string `dynamodbav:"binding_sha256"`
	State                  string `dynamodbav:"state"`
	PollAttempts           int    `dynamodbav:"poll_attempts"`
	ConsecutiveFailures    int    `dynamodbav:"consecutive_failures"`
	MaxConsecutiveFailures int    `dynamodbav:"max_consecutive_failures"`
	NextPollMS             int64  `dynamodbav:"next_poll_ms"`
	LeaseOwner             string `dynamodbav:"lease_owner,omitempty"`
	LeaseToken             string `dynamodbav:"lease_token,omitempty"`
	LeaseExpiresMS         int64  `dynamodbav:"lease_expires_ms,omitempty"`
	LastErrorCode          string `dynamodbav:"last_error_code,omitempty"`
	RemoteStatus           string `dynamodbav:"remote_status,omitempty"`
	LifecycleSHA256        string `dynamodbav:"lifecycle_sha256,omitempty"`
	CreatedMS              int64  `dynamodbav:"created_ms"`
	UpdatedMS              int64  `dynamodbav:"updated_ms"`
	HintMS                 int64  `dynamodbav:"hint_ms,omitempty"`
	RegularPollMS          int64  `dynamodbav:"regular_poll_ms,omitempty"`
	WaitUntilMS            int64  `dynamodbav:"wait_until_ms,omitempty"`
	WakeShard              *int   `dynamodbav:"wake_shard,omitempty"`
	WakeMS                 *int64 `dynamodbav:"wake_ms,omitempty"`
	AttentionShard         *int   `dynamodbav:"attention_shard,omitempty"`
	AttentionMS            *int64 `dynamodbav:"attention_ms,omitempty"`
	OutboxMS               int64  `dynamodbav:"outbox_ms,omitempty"`
	AcknowledgedMS         int64  `dynamodbav:"acknowledged_ms,omitempty"`
	ExpiresAt              int64  `dynamodbav:"expires_at,omitempty"`
	Timeline               string `dynamodbav:"timeline,omitempty"`
}

var knownAttributes = map[string]bool{
	AttrAcknowledgedMS: true,
	AttrExpiresAt:      true,
	AttrTimeline:       true,
	attrEventID:        true, attrSchemaVersion: true, attrSiteID: true, attrPlanID: true,
	attrWebsiteVersion: true, attrSourceSequence: true, attrJobCount: true,
	attrChangeSHA256: true, attrBindingSHA256: true, attrState: true, attrPollAttempts: true,
	attrFailures: true, attrMaxFailures: true, attrNextPollMS: true, attrLeaseOwner: true,
	attrLeaseToken: true, attrLeaseExpiresMS: true, attrLastErrorCode: true,
	attrRemoteStatus: true, attrLifecycleSHA256: true, attrLifecycle: true,
	attrCreatedMS: true, attrUpdatedMS: true, attrHintMS: true, attrRegularPollMS: true, attrWaitUntilMS: true, attrWakeShard: true, attrWakeMS: true,
	attrAttentionShard: true, attrAttentionMS: true, attrOutboxMS: true,
}

// encode is the full item of rec, with its index keys derived from it.
func encode(rec monitor.Record) (map[string]types.AttributeValue, error) {
	it := item{
		EventID: rec.EventID, SchemaVersion: rec.SchemaVersion, SiteID: rec.SiteID, PlanID: rec.PlanID,
		WebsiteVersion: rec.WebsiteVersion, SourceSequence: rec.SourceSequence, JobCount: rec.JobCount,
		ChangeSHA256: rec.ChangeSHA256, BindingSHA256: rec.BindingSHA256, State: string(rec.State),
		PollAttempts: rec.PollAttempts, ConsecutiveFailures: rec.ConsecutiveFailures,
		MaxConsecutiveFailures: rec.MaxConsecutiveFailures, NextPollMS: rec.NextPollMS,
		LeaseOwner: rec.LeaseOwner, LeaseToken: rec.LeaseToken, LeaseExpiresMS: rec.LeaseExpiresMS,
		LastErrorCode: rec.LastErrorCode, RemoteStatus: rec.RemoteStatus,
		LifecycleSHA256: rec.LifecycleSHA256,
		CreatedMS:       rec.CreatedMS, UpdatedMS: rec.UpdatedMS, OutboxMS: rec.OutboxMS, HintMS: rec.HintMS,
		RegularPollMS: rec.RegularPollMS, WaitUntilMS: rec.WaitUntilMS,
		AcknowledgedMS: rec.AcknowledgedMS, ExpiresAt: rec.ExpiresAt, Timeline: EncodeTimeline(rec.Timeline),
	}
	if rec.OutboxMS != 0 && rec.State.Final() {
		// An owed outcome is listed by the wake index at its outbox key
		// (a record final at registration; docs/design.md "Owed outcomes
		// in the wake index").
		shard, wake := Shard(rec.EventID), rec.OutboxMS
		it.WakeShard, it.WakeMS = &shard, &wake
	} else if wake, ok := rec.WakeMS(); ok {
		shard := Shard(rec.EventID)
		it.WakeShard, it.WakeMS = &shard, &wake
	}
	if rec.NeedsAttention() {
		shard := Shard(rec.EventID)
		at := rec.UpdatedMS
		it.AttentionShard, it.AttentionMS = &shard, &at
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil || len(rec.Lifecycle) == 0 {
		return av, err
	}
	snap, err := encodeSnapshot(rec.Lifecycle)
	if err != nil {
		return nil, err
	}
	av[attrLifecycle] = &types.AttributeValueMemberB{Value: snap}
	return av, nil
}

// decode reads a stored item. It never fails: an item that does not decode,
// carries unknown attributes (text has no place here) or whose index keys
// disagree with its state comes back Corrupt, and validation marks it
// failed.
func decode(av map[string]types.AttributeValue) monitor.Record {
	var it item
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		// Keep what identifies the item and whether it was already marked,
		// so a corrupt item marked failed is not rewritten on every read.
		str := func(name string) string {
			if v, ok := av[name].(*types.AttributeValueMemberS); ok {
				return v.Value
			}
			return ""
		}
		num := func(name string) int64 {
			if v, ok := av[name].(*types.AttributeValueMemberN); ok {
				n, _ := strconv.ParseInt(v.Value, 10, 64)
				return n
			}
			return 0
		}
		// The schema version decides whether the item is this code's to
		// mark (monitor.Validate); the outbox key keeps the outcome owed
		// for it findable.
		return monitor.Record{EventID: str(attrEventID), State: monitor.State(str(attrState)),
			LastErrorCode: str(attrLastErrorCode), OutboxMS: num(attrOutboxMS),
			SchemaVersion: int(num(attrSchemaVersion)), Corrupt: true}
	}
	rec := monitor.Record{
		EventID: it.EventID, SiteID: it.SiteID, PlanID: it.PlanID, WebsiteVersion: it.WebsiteVersion,
		SourceSequence: it.SourceSequence, JobCount: it.JobCount, ChangeSHA256: it.ChangeSHA256,
		BindingSHA256: it.BindingSHA256, State: monitor.State(it.State), PollAttempts: it.PollAttempts,
		ConsecutiveFailures: it.ConsecutiveFailures, MaxConsecutiveFailures: it.MaxConsecutiveFailures,
		NextPollMS: it.NextPollMS, LeaseOwner: it.LeaseOwner, LeaseToken: it.LeaseToken,
		LeaseExpiresMS: it.LeaseExpiresMS, LastErrorCode: it.LastErrorCode, RemoteStatus: it.RemoteStatus,
		LifecycleSHA256: it.LifecycleSHA256, CreatedMS: it.CreatedMS, UpdatedMS: it.UpdatedMS,
		OutboxMS: it.OutboxMS, HintMS: it.HintMS, RegularPollMS: it.RegularPollMS, WaitUntilMS: it.WaitUntilMS, SchemaVersion: it.SchemaVersion, AcknowledgedMS: it.AcknowledgedMS,
		ExpiresAt: it.ExpiresAt,
	}
	if it.Timeline != "" {
		t, ok := decodeTimeline(it.Timeline)
		if !ok {
			rec.Corrupt = true
		}
		rec.Timeline = t
	}
	if v, ok := av[attrLifecycle]; ok {
		snap, err := decodeSnapshot(v)
		if err != nil {
			rec.Corrupt = true
		}
		rec.Lifecycle = snap
	}
	if it.SchemaVersion != monitor.SchemaVersion {
		// Another format (or none: a missing schema_version reads as 0):
		// its attributes and index keys are not ours to judge; validation
		// refuses it as lifecycle_monitor.schema_altered.
		return rec
	}
	for name := range av {
		if !knownAttributes[name] {
			rec.Corrupt = true
		}
	}
	if !indexKeysAgree(rec, it) {
		rec.Corrupt = true
	}
	return rec
}

func indexKeysAgree(rec monitor.Record, it item) bool {
	shard := Shard(rec.EventID)
	if rec.State.Final() && rec.OutboxMS != 0 {
		// An owed outcome in the wake index (docs/design.md "Owed outcomes
		// in the wake index"): the wake keys the claim left (or the outbox
		// key itself), at most the outbox key; the attention keys as for
		// any record.
		if it.WakeShard == nil || it.WakeMS == nil || *it.WakeShard != shard || *it.WakeMS > rec.OutboxMS {
			return false
		}
		attention := rec.NeedsAttention()
		return attention == (it.AttentionShard != nil && it.AttentionMS != nil) && (it.AttentionShard == nil) == (it.AttentionMS == nil) &&
			(!attention || *it.AttentionShard == shard)
	}
	wake, wakes := rec.WakeMS()
	if wakes != (it.WakeShard != nil && it.WakeMS != nil) || (it.WakeShard == nil) != (it.WakeMS == nil) {
		return false
	}
	if wakes && (*it.WakeShard != shard || *it.WakeMS != wake) {
		return false
	}
	attention := rec.NeedsAttention()
	if attention != (it.AttentionShard != nil && it.AttentionMS != nil) || (it.AttentionShard == nil) != (it.AttentionMS == nil) {
		return false
	}
	return !attention || *it.AttentionShard == shard
}
