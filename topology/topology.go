// Package topology is the single definition of localeflow's AWS resources:
// table names and key schemas, the sparse indexes, queues with their DLQs
// and redrive policy, the event bus, the rules that route each input
// detail-type to its queue, and the schedules.
//
// Both the CDK stack (infra/) and the local-stack bootstrap
// (dev/cmd/localeflow-bootstrap) read this package, so the resources created on
// AWS, on LocalStack and on the Docker-free local stack cannot drift apart.
// It is pure data: no AWS SDK, no CDK imports.
package topology

import (
	"fmt"
	"regexp"

	"github.com/localeflow/localeflow/contract"
)

// DefaultPrefix names the resources when no prefix is configured.
const DefaultPrefix = "localeflow"

// Attribute names shared by the stores and the index definitions.
const (
	// Monitor table.
	AttrEventID = "event_id"
	// Release table (one item collection per event).
	AttrPK = "pk"
	AttrSK = "sk"
	// Sparse wake index: present only on items that can wake (due or leased).
	AttrWakeShard = "wake_shard"
	AttrWakeMS    = "wake_ms"
	// Sparse attention index: present only on items an operator must look at
	// (failed, remote failure); health reads it instead of scanning.
	AttrAttentionShard = "attention_shard"
	AttrAttentionMS    = "attention_ms"
	// outbox_ms on a monitor record whose outcome is owed: the time of the
	// finishing write (it versions the outcome); the record stays in the
	// wake index until its outcome is announced (docs/design.md "Owed
	// outcomes in the wake index"). No table has an outbox index: storage
	// format 1 writes no outbox_shard (the invariant checker reports one).
	AttrOutboxShard = "outbox_shard"
	AttrOutboxMS    = "outbox_ms"
	// Records that expire carry a TTL attribute in epoch seconds.
	AttrExpiresAt = "expires_at"
)

// Index names.
const (
	IndexWake      = "wake"
	IndexAttention = "attention"
)

// WakeShards is the number of partitions of the sparse indexes. Items are
// spread over shards by a hash of their id so that due discovery never
// concentrates on one hot partition; a sweep queries every shard.
const WakeShards = 8

// KeyType is a DynamoDB scalar attribute type.
type KeyType string

// Attribute types.
const (
	KeyString KeyType = "S"
	KeyNumber KeyType = "N"
)

// Key is one key attribute.
type Key struct {
	Name string
	Type KeyType
}

// Index is a global secondary index.
type Index struct {
	Name string
	// Partition and Sort keys; items lacking either attribute are absent
	// from the index (that is what makes it sparse).
	Partition Key
	Sort      Key
	// KeysOnly projects only the table and index keys: discovery reads keys
	// and then does a conditional write against the base table.
	KeysOnly bool
}

// Table is a DynamoDB table.
type Table struct {
	// Logical is the stable CDK logical id suffix and the env var stem.
	Logical string
	Name    string
	// Partition and optional Sort key of the base table.
	Partition Key
	Sort      *Key
	Indexes   []Index
	// TTLAttribute is empty when the table keeps its records forever.
	TTLAttribute string
}

// Queue is an SQS queue with its dead-letter queue.
type Queue struct {
	Logical string
	Name    string
	DLQName string
	// MaxReceiveCount before a message is moved to the DLQ.
	MaxReceiveCount int
	// ConsumerTimeoutSeconds is the timeout of the Lambda that consumes the
	// queue; VisibilityTimeoutSeconds is 6x that (the AWS recommendation for
	// event source mappings).
	ConsumerTimeoutSeconds   int
	VisibilityTimeoutSeconds int
	// RetentionSeconds for messages in the queue; DLQs keep 14 days.
	RetentionSeconds    int
	DLQRetentionSeconds int
	// BatchSize of the event source mapping that drains this queue.
	BatchSize int
}

// QuarantineQueue keeps the messages the consumers reject for good, with
// their rejection code, for an operator to inspect and replay. It has no
// consumer and no DLQ.
type QuarantineQueue struct {
	Logical          string
	Name             string
	RetentionSeconds int
}

// EventDLQ keeps the events EventBridge could not deliver to a rule's
// target (an input rule's queue, or a schedule's function) after the
// target's retry policy: the dead-letter queue of every rule target. It
// has no consumer; an operator lists and redrives it (localeflow dlq).
type EventDLQ struct {
	Logical          string
	Name             string
	RetentionSeconds int
	// MaxEventAgeSeconds and RetryAttempts are the retry policy of every
	// input rule's target: EventBridge retries a failed delivery for at
	// most this long (or this many times), then sends the event here.
	MaxEventAgeSeconds int
	RetryAttempts      int
}

// Archive keeps every input event put on the bus for RetentionDays, for
// an operator to replay a time window (localeflow replay).
type Archive struct {
	Logical       string
	Name          string
	RetentionDays int
}

// Rule routes input detail-types from the bus to a queue.
type Rule struct {
	Logical     string
	Name        string
	DetailTypes []string
	// TargetQueue is the Logical name of the target queue.
	TargetQueue string
}

// Schedule fires a function on a fixed rate.
type Schedule struct {
	Logical string
	Name    string
	// RateMinutes between invocations.
	RateMinutes int
	// Function is the name of the function directory under functions/.
	Function string
}

// Function is one Lambda function.
type Function struct {
	Logical        string
	Name           string
	Dir            string // functions/<Dir>
	MemoryMB       int
	TimeoutSeconds int
	// Queue is the Logical name of the queue it consumes, if any.
	Queue string
	// Emits are the only detail-types the function may put on the bus (its
	// role's PutEvents is conditioned on them and on contract.EventSource). No
	// function emits an input detail-type.
	Emits []string
}

// Topology is every resource of one deployment.
type Topology struct {
	Prefix    string
	Monitor   Table
	Release   Table
	PollQueue Queue
	RelQueue  Queue
	// Quarantine receives the rejected messages of both queues.
	Quarantine QuarantineQueue
	BusName    string
	// EventDLQ is the dead-letter queue of every rule target; Archive
	// keeps the bus's input events.
	EventDLQ  EventDLQ
	Archive   Archive
	Rules     []Rule
	Schedules []Schedule
	Functions []Function
}

var prefixPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// ValidatePrefix reports whether prefix can name every resource (the
// strictest limits are SQS names, 80 chars, and lowercase for readability).
func ValidatePrefix(prefix string) error {
	if !prefixPattern.MatchString(prefix) {
		return fmt.Errorf("topology: prefix %q must match %s", prefix, prefixPattern)
	}
	return nil
}

// Default timeouts of the consuming functions (seconds).
const (
	PollerTimeoutSeconds      = 120
	CoordinatorTimeoutSeconds = 120
	HealthTimeoutSeconds      = 30
)

// New returns the topology for prefix. It panics on an invalid prefix; call
// ValidatePrefix first for input that comes from outside.
func New(prefix string) Topology {
	if err := ValidatePrefix(prefix); err != nil {
		panic(err)
	}
	wake := Index{
		Name:      IndexWake,
		Partition: Key{AttrWakeShard, KeyNumber},
		Sort:      Key{AttrWakeMS, KeyNumber},
		KeysOnly:  true,
	}
	attention := Index{
		Name:      IndexAttention,
		Partition: Key{AttrAttentionShard, KeyNumber},
		Sort:      Key{AttrAttentionMS, KeyNumber},
		KeysOnly:  true,
	}
	queue := func(logical, stem string, consumerTimeout int) Queue {
		return Queue{
			Logical:                  logical,
			Name:                     prefix + "-" + stem,
			DLQName:                  prefix + "-" + stem + "-dlq",
			MaxReceiveCount:          5,
			ConsumerTimeoutSeconds:   consumerTimeout,
			VisibilityTimeoutSeconds: 6 * consumerTimeout,
			RetentionSeconds:         4 * 24 * 3600,
			DLQRetentionSeconds:      14 * 24 * 3600,
			BatchSize:                10,
		}
	}
	return Topology{
		Prefix: prefix,
		Monitor: Table{
			Logical:   "MonitorTable",
			Name:      prefix + "-monitor",
			Partition: Key{AttrEventID, KeyString},
			Indexes:   []Index{wake, attention},
			// Finished records that need no attention expire
			// (LOCALEFLOW_MONITOR_RETENTION, default 90 days).
			TTLAttribute: AttrExpiresAt,
		},
		Release: Table{
			Logical:      "ReleaseTable",
			Name:         prefix + "-release",
			Partition:    Key{AttrPK, KeyString},
			Sort:         &Key{AttrSK, KeyString},
			Indexes:      []Index{wake, attention},
			TTLAttribute: AttrExpiresAt,
		},
		PollQueue: queue("PollQueue", "poll", PollerTimeoutSeconds),
		RelQueue:  queue("ReleaseQueue", "release", CoordinatorTimeoutSeconds),
		Quarantine: QuarantineQueue{
			Logical: "QuarantineQueue", Name: prefix + "-quarantine", RetentionSeconds: 14 * 24 * 3600,
		},
		BusName: prefix + "-bus",
		EventDLQ: EventDLQ{
			Logical: "EventTargetDLQ", Name: prefix + "-event-dlq", RetentionSeconds: 14 * 24 * 3600,
			MaxEventAgeSeconds: 3600, RetryAttempts: 185,
		},
		Archive: Archive{Logical: "EventArchive", Name: prefix + "-archive", RetentionDays: 7},
		Rules: []Rule{
			{
				Logical:     "ChangeDispatchedRule",
				Name:        prefix + "-change-dispatched",
				DetailTypes: []string{contract.DetailChangeDispatched},
				TargetQueue: "PollQueue",
			},
			{
				Logical:     "ReleaseInputRule",
				Name:        prefix + "-release-input",
				DetailTypes: []string{contract.DetailPlanAccepted, contract.DetailJobCompleted},
				TargetQueue: "ReleaseQueue",
			},
			{
				Logical:     "ChangeHintRule",
				Name:        prefix + "-change-hint",
				DetailTypes: []string{contract.DetailChangeHint},
				TargetQueue: "PollQueue",
			},
		},
		Schedules: []Schedule{
			{Logical: "SweepSchedule", Name: prefix + "-sweep", RateMinutes: 1, Function: "poller"},
			{Logical: "ReleaseSweepSchedule", Name: prefix + "-release-sweep", RateMinutes: 5, Function: "coordinator"},
			{Logical: "HealthSchedule", Name: prefix + "-health", RateMinutes: 5, Function: "health"},
		},
		Functions: []Function{
			{Logical: "PollerFunction", Name: prefix + "-poller", Dir: "poller", MemoryMB: 256, TimeoutSeconds: PollerTimeoutSeconds, Queue: "PollQueue",
				Emits: []string{contract.DetailChangeTerminal}},
			{Logical: "CoordinatorFunction", Name: prefix + "-coordinator", Dir: "coordinator", MemoryMB: 256, TimeoutSeconds: CoordinatorTimeoutSeconds, Queue: "ReleaseQueue",
				Emits: []string{contract.DetailReleaseApproved, contract.DetailDeliveryReady, contract.DetailDeliveryDelivered}},
			{Logical: "HealthFunction", Name: prefix + "-health", Dir: "health", MemoryMB: 256, TimeoutSeconds: HealthTimeoutSeconds,
				Emits: []string{contract.DetailHealthBlocked}},
		},
	}
}

// Queues lists both queues.
func (t Topology) Queues() []Queue { return []Queue{t.PollQueue, t.RelQueue} }

// Tables lists both tables.
func (t Topology) Tables() []Table { return []Table{t.Monitor, t.Release} }

// QueueByLogical finds a queue by its Logical name.
func (t Topology) QueueByLogical(logical string) (Queue, bool) {
	for _, q := range t.Queues() {
		if q.Logical == logical {
			return q, true
		}
	}
	return Queue{}, false
}

// EventPattern is the EventBridge pattern of a rule, as JSON-ready data.
func (r Rule) EventPattern() map[string]any {
	return map[string]any{
		"source":      []string{contract.EventSource},
		"detail-type": r.DetailTypes,
	}
}

// ReleaseCensusAttributes are the only attributes the health function reads
// from the release table: the keys, the version, the index keys and the
// content-free fields of the records the sparse indexes list (evidence,
// delivery, job, approval and blocked records). Source and result texts and
// the approval token are never in it; the health role's
// dynamodb:Attributes condition is this list.
var ReleaseCensusAttributes = []string{
	AttrPK, AttrSK, "v", "schema_version",
	AttrWakeShard, AttrWakeMS, AttrAttentionShard, AttrAttentionMS,
	"request_id", "event_id", "plan_id", "job_id", "result_sha256", "evidence_revision",
	"site_id", "delivery_id", "bundle_sha256", "signature", "prepared_ms",
	// The signing key id of approvals and deliveries (content-free).
	"key_id",
	"status", "attempts", "max_attempts", "next_attempt_ms", "lease_owner", "lease_token",
	"lease_expires_ms", "last_error_code", "created_ms", "updated_ms", "parked",
	// Delivery records: the status whose event was published.
	"announced",
	// Job records: a succeeded job never claimed, a failed job.
	"error_code", "received_ms", "payload_sha256", "awaiting_claim", "not_before_ms",
	// Approval records completing a plan without a delivery.
	"approval_id", "target_locale", "approved_ms", "expires_ms", "awaiting_delivery",
	// Blocked records.
	"code", "blocked_ms",
	// An operator's acknowledgement of a failed or blocked record.
	"acknowledged_ms",
}

// MonitorCensusAttributes are the only attributes the health function reads
// from monitor records (its BatchGetItem projection and the health role's
// dynamodb:Attributes condition): every attribute of a monitor record
// (ids, states, counts, codes, hashes, the content-free lifecycle
// snapshot, timestamps, index keys), never an acknowledgement journal's
// operator ARN or reason.
var MonitorCensusAttributes = []string{
	AttrEventID, "schema_version", "site_id", "plan_id", "website_version", "source_sequence", "job_count",
	"change_sha256", "binding_sha256", "state", "poll_attempts", "consecutive_failures",
	"max_consecutive_failures", "next_poll_ms", "lease_owner", "lease_token", "lease_expires_ms",
	"last_error_code", "remote_status", "lifecycle_sha256", "lifecycle", "created_ms", "updated_ms",
	"hint_ms", "regular_poll_ms", "wait_until_ms", "acknowledged_ms", AttrExpiresAt, "timeline",
	AttrWakeShard, AttrWakeMS, AttrAttentionShard, AttrAttentionMS, AttrOutboxMS,
}

// MonitorIndexQueryAttributes are the attributes a health query of the
// monitor table's wake and attention indexes may name or read: the table
// key (its projection) and the index keys (its key condition).
var MonitorIndexQueryAttributes = []string{AttrEventID, AttrWakeShard, AttrWakeMS, AttrAttentionShard, AttrAttentionMS}

// ReleaseIndexQueryAttributes are the same for the release table's wake
// and attention indexes.
var ReleaseIndexQueryAttributes = []string{AttrPK, AttrSK, AttrWakeShard, AttrWakeMS, AttrAttentionShard, AttrAttentionMS}

// RulesFor lists the input rules that route detailType (none for a
// detail-type the deployment does not consume).
func (t Topology) RulesFor(detailType string) []Rule {
	var out []Rule
	for _, r := range t.Rules {
		for _, dt := range r.DetailTypes {
			if dt == detailType {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// InputDetailTypes are the detail-types the rules route, each once, in
// rule order.
func (t Topology) InputDetailTypes() []string {
	var out []string
	for _, r := range t.Rules {
		out = append(out, r.DetailTypes...)
	}
	return out
}
