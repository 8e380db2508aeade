package release

import (
	"context"
	"strings"

	"github.com/localeflow/localeflow/core"
)

// Sort-key prefixes of an event's item collection. Only source# and
// result# items hold texts.
const (
	SKPlan           = "plan"
	SKDelivery       = "delivery"
	SKJobPrefix      = "job#"
	SKSourcePrefix   = "source#"
	SKResultPrefix   = "result#"
	SKEvidencePrefix = "evidence#"
	SKApprovalPrefix = "approval#"
	SKBlocked        = "blocked"
	// SKAckPrefix prefixes the sort key of the acknowledged record in its
	// acknowledgement journal record (ack#evidence#<request>, ack#delivery,
	// ack#job#<job>, ack#blocked).
	SKAckPrefix = "ack#"
	// SKTally is the release's tally of approved jobs (TallyRecord). It
	// sorts after every text key, so LoadState (sk < "result#"), LoadKeys
	// and LoadPrefix of the other kinds never meet it (docs/design.md
	// "Release reads").
	SKTally = "tally"
)

// CodeStoreConflict is returned by Store.Put when the stored version is not
// the expected one: somebody else changed the record first. Retryable.
const CodeStoreConflict = "release.store.conflict"

// ErrConflict is the conflict error; test with errors.Is or core.HasCode.
var ErrConflict = core.Retry(CodeStoreConflict)

// Record is one item of an event's collection. Version counts writes: a
// record is written with Version = previous version + 1 and the store
// accepts the write only if the stored version is still the previous one
// (0 = the record must not exist). That compare-and-swap is the fencing of
// every lease: any concurrent change invalidates a stale writer.
type Record interface {
	// Key is the record's event id and sort key.
	Key() (eventID, sortKey string)
	// RecordVersion is the version this write creates.
	RecordVersion() int64
}

// Store keeps the release records. Implementations: adapters/releasedb
// (DynamoDB) and releasetest.MemStore; releasetest.Run is the conformance
// suite both pass.
type Store interface {
	// Load returns every record of one event in one read (one DynamoDB
	// Query). An event without records is an empty Snapshot, not an error.
	Load(ctx context.Context, eventID string) (Snapshot, error)
	// LoadState returns every record of one event except the text records
	// (source#, result#: IsTextKey) and the tally (SKTally), in one
	// strongly consistent read (one DynamoDB Query of the sort keys below
	// SKResultPrefix). A step reads
	// the release's state with it and only the texts it uses with
	// LoadKeys (docs/design.md "Release reads").
	LoadState(ctx context.Context, eventID string) (Snapshot, error)
	// LoadKeys returns the event's records with the given sort keys
	// (strongly consistent; a missing record is simply absent).
	LoadKeys(ctx context.Context, eventID string, sortKeys ...string) (Snapshot, error)
	// LoadPrefix returns the event's records whose sort key starts with
	// prefix (SKResultPrefix or SKSourcePrefix: one strongly consistent
	// DynamoDB Query of that range).
	LoadPrefix(ctx context.Context, eventID, prefix string) (Snapshot, error)
	// Put writes rec if the stored version equals prev (0: absent), else
	// returns an error with CodeStoreConflict and changes nothing.
	Put(ctx context.Context, rec Record, prev int64) error
	// PutAll writes every record or none: each write is conditional on
	// its Prev as in Put, and one refused condition refuses them all with
	// CodeStoreConflict (one TransactWriteItems on DynamoDB). At most
	// MaxWrites records of one event, each key at most once.
	PutAll(ctx context.Context, writes ...Write) error
}

// IsTextKey reports whether a sort key names a text record (source# or
// result#), the records LoadState leaves out.
func IsTextKey(sk string) bool {
	return strings.HasPrefix(sk, SKSourcePrefix) || strings.HasPrefix(sk, SKResultPrefix)
}

// MaxLoadKeys bounds one LoadKeys.
const MaxLoadKeys = 100

// Write is one conditional write of a PutAll.
type Write struct {
	Rec  Record
	Prev int64
}

// MaxWrites bounds one PutAll (DynamoDB's transaction limit is 100).
const MaxWrites = 100

// SchemaVersion is the version of the stored format of every release item
// (storage format 1): stores write it with each item as schema_version and
// refuse to read an item of another version, or one without it. A later
// format is a new version with one upgrade reader per record kind, never a
// setting.
const SchemaVersion = 1

// AttrSchemaVersion is the attribute (or JSON field) that carries it.
const AttrSchemaVersion = "schema_version"

// Codes of the release store (every Store implementation answers them).
const (
	// CodeSchemaUnsupported refuses a stored item whose schema_version is
	// missing or not SchemaVersion. Not retryable: the item is left as it
	// is (a store's update of an existing item requires SchemaVersion) and
	// every read of it fails the same way until an operator deals with it.
	CodeSchemaUnsupported = "release.store.schema_unsupported"
	// CodeRecordInvalid refuses a write the store cannot make as asked.
	CodeRecordInvalid = "release.store.record_invalid"
	// CodeStoreWriteFailed is a store write that failed (retryable).
	CodeStoreWriteFailed = "release.store.write_failed"
	// CodeStorePageInvalid refuses a page request outside the limits.
	CodeStorePageInvalid = "release.store.page_invalid"
	// CodeStoreCursorInvalid refuses a page cursor the store did not make.
	CodeStoreCursorInvalid = "release.store.cursor_invalid"
)

// ValidWrites checks the shape of a PutAll: 1..MaxWrites writes of one
// event, distinct keys, each at version Prev+1.
func ValidWrites(writes []Write) error {
	if len(writes) == 0 || len(writes) > MaxWrites {
		return core.Fail(CodeRecordInvalid)
	}
	seen := make(map[string]bool, len(writes))
	first := ""
	for i, w := range writes {
		if w.Rec == nil {
			return core.Fail(CodeRecordInvalid)
		}
		eventID, sk := w.Rec.Key()
		if i == 0 {
			first = eventID
		}
		if eventID != first || !core.ValidToken(eventID) || sk == "" || seen[sk] || w.Rec.RecordVersion() != w.Prev+1 {
			return core.Fail(CodeRecordInvalid)
		}
		seen[sk] = true
	}
	return nil
}

// Snapshot is one event's records.
type Snapshot struct {
	Plan      *PlanRecord
	Jobs      map[string]*JobRecord      // by job id
	Sources   map[string]*SourceRecord   // by job id
	Results   map[string]*ResultRecord   // by job id
	Evidence  map[string]*EvidenceRecord // by request id
	Approvals map[string]*ApprovalRecord // by job id
	Delivery  *DeliveryRecord
	Blocked   *BlockedRecord
	// Acks are the acknowledgement journal records, by the sort key of the
	// record they acknowledged.
	Acks map[string]*AckRecord
	// Tally is the release's tally of approved jobs; only LoadKeys of
	// SKTally (or Load) reads it.
	Tally *TallyRecord
}

// Each calls f with every record of the snapshot.
func (s *Snapshot) Each(f func(Record)) {
	if s.Plan != nil {
		f(s.Plan)
	}
	for _, r := range s.Jobs {
		f(r)
	}
	for _, r := range s.Sources {
		f(r)
	}
	for _, r := range s.Results {
		f(r)
	}
	for _, r := range s.Evidence {
		f(r)
	}
	for _, r := range s.Approvals {
		f(r)
	}
	if s.Delivery != nil {
		f(s.Delivery)
	}
	if s.Blocked != nil {
		f(s.Blocked)
	}
	for _, r := range s.Acks {
		f(r)
	}
	if s.Tally != nil {
		f(s.Tally)
	}
}

// NewSnapshot returns an empty snapshot with its maps allocated.
func NewSnapshot() Snapshot {
	return Snapshot{
		Jobs:      map[string]*JobRecord{},
		Sources:   map[string]*SourceRecord{},
		Results:   map[string]*ResultRecord{},
		Evidence:  map[string]*EvidenceRecord{},
		Approvals: map[string]*ApprovalRecord{},
		Acks:      map[string]*AckRecord{},
	}
}

// Add files rec into the snapshot (stores use it while reading).
func (s *Snapshot) Add(rec Record) {
	switch r := rec.(type) {
	case *PlanRecord:
		s.Plan = r
	case *JobRecord:
		s.Jobs[r.JobID] = r
	case *SourceRecord:
		s.Sources[r.JobID] = r
	case *ResultRecord:
		s.Results[r.JobID] = r
	case *EvidenceRecord:
		s.Evidence[r.RequestID] = r
	case *ApprovalRecord:
		s.Approvals[r.JobID] = r
	case *DeliveryRecord:
		s.Delivery = r
	case *BlockedRecord:
		s.Blocked = r
	case *AckRecord:
		if s.Acks == nil {
			s.Acks = map[string]*AckRecord{}
		}
		s.Acks[r.AckedKey] = r
	case *TallyRecord:
		s.Tally = r
	}
}

// PlanRecord is the verified plan, content-free (no source texts).
type PlanRecord struct {
	Event         Event     `dynamodbav:"event"`
	PlanID        string    `dynamodbav:"plan_id"`
	Jobs          []PlanJob `dynamodbav:"jobs"`
	PayloadSHA256 string    `dynamodbav:"payload_sha256"`
	ReceivedMS    int64     `dynamodbav:"received_ms"`
	// Seal is the coordinator's MAC of the fields above (Coordinator.
	// CheckPlan), made when the signed plan event verified.
	Seal string `dynamodbav:"seal"`
	// SealKey is the id of the event key that made Seal (SealKeyID): a
	// hint for operators rotating the event key (which plans still need
	// the old key). It is not sealed and never trusted: the seal is
	// checked under every key of the set.
	SealKey string `dynamodbav:"seal_key"`
	Version int64  `dynamodbav:"v"`
}

func (r *PlanRecord) Key() (string, string) { return r.Event.EventID, SKPlan }
func (r *PlanRecord) RecordVersion() int64  { return r.Version }

// Job returns the plan's job with id, if any.
func (r *PlanRecord) Job(id string) (PlanJob, bool) {
	for _, j := range r.Jobs {
		if j.JobID == id {
			return j, true
		}
	}
	return PlanJob{}, false
}

// JobRecord is a job's reported status, content-free.
type JobRecord struct {
	EventID       string `dynamodbav:"event_id"`
	PlanID        string `dynamodbav:"plan_id"`
	JobID         string `dynamodbav:"job_id"`
	Status        string `dynamodbav:"status"`
	ErrorCode     string `dynamodbav:"error_code,omitempty"`
	ResultSHA256  string `dynamodbav:"result_sha256,omitempty"`
	PayloadSHA256 string `dynamodbav:"payload_sha256"`
	ReceivedMS    int64  `dynamodbav:"received_ms"`
	// AwaitingClaim marks a succeeded job whose evidence request was never
	// created: it wakes (at ReceivedMS, or NotBeforeMS) until the run that
	// creates the evidence record clears it.
	AwaitingClaim bool `dynamodbav:"awaiting_claim,omitempty"`
	// NotBeforeMS defers the wake of a never-claimed job while the run
	// waits on another locale's lease or backoff (it cannot claim this job
	// before that one is approved).
	NotBeforeMS int64 `dynamodbav:"not_before_ms,omitempty"`
	// AcknowledgedMS is set by an operator's acknowledgement of a failed
	// job (localeflow ack): it leaves the attention index.
	AcknowledgedMS int64 `dynamodbav:"acknowledged_ms,omitempty"`
	Version        int64 `dynamodbav:"v"`
}

func (r *JobRecord) Key() (string, string) { return r.EventID, SKJobPrefix + r.JobID }
func (r *JobRecord) RecordVersion() int64  { return r.Version }

// SourceRecord holds a job's source text (a text record).
type SourceRecord struct {
	EventID      string `dynamodbav:"event_id"`
	JobID        string `dynamodbav:"job_id"`
	SourceSHA256 string `dynamodbav:"source_sha256"`
	Text         string `dynamodbav:"text"`
	Version      int64  `dynamodbav:"v"`
	// ExpiresAt is the text's expiry as read (epoch seconds, 0: none), set
	// only by the text expiry of a release that ended (docs/design.md
	// "Retention"): ingest reads it to know the release ended. Never
	// written by a Put of the coordinator (sources are created without).
	ExpiresAt int64 `dynamodbav:"expires_at,omitempty" json:"-"`
}

func (r *SourceRecord) Key() (string, string) { return r.EventID, SKSourcePrefix + r.JobID }
func (r *SourceRecord) RecordVersion() int64  { return r.Version }

// ResultRecord holds a succeeded job's result (a text record): the
// canonical JSON of Result, whose hash is ResultSHA256.
type ResultRecord struct {
	EventID      string `dynamodbav:"event_id"`
	PlanID       string `dynamodbav:"plan_id"`
	JobID        string `dynamodbav:"job_id"`
	ResultSHA256 string `dynamodbav:"result_sha256"`
	ResultJSON   string `dynamodbav:"result_json"`
	Version      int64  `dynamodbav:"v"`
}

func (r *ResultRecord) Key() (string, string) { return r.EventID, SKResultPrefix + r.JobID }
func (r *ResultRecord) RecordVersion() int64  { return r.Version }

// ApprovalRecord is a signed approval of one locale's result. A store
// keeps only its signed payload and signature (Body, Sig) with the
// attributes read without opening it (StoredForm); a read fills PlanID,
// TargetLocale, ResultSHA256, RequestID, ApprovalID and Token from them
// (OpenStored).
type ApprovalRecord struct {
	EventID      string `dynamodbav:"event_id"`
	PlanID       string `dynamodbav:"plan_id"`
	JobID        string `dynamodbav:"job_id"`
	TargetLocale string `dynamodbav:"target_locale"`
	ResultSHA256 string `dynamodbav:"result_sha256"`
	RequestID    string `dynamodbav:"request_id"`
	ApprovalID   string `dynamodbav:"approval_id"`
	Token        string `dynamodbav:"token"`
	// KeyID names the approval key that signed Token (Authority.KeyID,
	// docs/design.md "Key ids").
	KeyID      string `dynamodbav:"key_id"`
	ApprovedMS int64  `dynamodbav:"approved_ms"`
	ExpiresMS  int64  `dynamodbav:"expires_ms"`
	// AwaitingDelivery marks the approval that completed the plan: it
	// wakes (at ApprovedMS) until the run that prepares the delivery
	// clears it, or the release is blocked.
	AwaitingDelivery bool `dynamodbav:"awaiting_delivery,omitempty"`
	// Body and Sig are the exact payload signed and its 64-byte signature
	// (docs/design.md "Compact approvals"). Stored in place of Token and
	// of PlanID, TargetLocale, ResultSHA256, RequestID and ApprovalID,
	// which a store read fills from them (OpenStored), Token rebuilt byte
	// for byte.
	Body    string `dynamodbav:"body,omitempty" json:",omitempty"`
	Sig     []byte `dynamodbav:"sig,omitempty" json:",omitempty"`
	Version int64  `dynamodbav:"v"`
}

func (r *ApprovalRecord) Key() (string, string) { return r.EventID, SKApprovalPrefix + r.JobID }
func (r *ApprovalRecord) RecordVersion() int64  { return r.Version }

// Lease is the attempt bookkeeping of evidence and delivery records.
//
//	pending ──claim──► leased ──succeed──► succeeded
//	retry_wait ─claim─┘   │ ──fail (retryable, attempts < max)──► retry_wait
//	                      │ ──fail (final)──► failed
//	                      └─ lease expired (seen at next claim) ─► retry_wait | failed
type Lease struct {
	Status         State  `dynamodbav:"status"`
	Attempts       int    `dynamodbav:"attempts"`
	MaxAttempts    int    `dynamodbav:"max_attempts"`
	NextAttemptMS  int64  `dynamodbav:"next_attempt_ms"`
	LeaseOwner     string `dynamodbav:"lease_owner,omitempty"`
	LeaseToken     string `dynamodbav:"lease_token,omitempty"`
	LeaseExpiresMS int64  `dynamodbav:"lease_expires_ms,omitempty"`
	LastErrorCode  string `dynamodbav:"last_error_code,omitempty"`
	CreatedMS      int64  `dynamodbav:"created_ms"`
	UpdatedMS      int64  `dynamodbav:"updated_ms"`
	// Parked takes the record out of the wake index while its release is
	// blocked for good (Coordinator.block); a new claim un-parks it.
	Parked bool `dynamodbav:"parked,omitempty"`
	// AcknowledgedMS is set by an operator's acknowledgement of a failed
	// record (localeflow ack): it leaves the attention index.
	AcknowledgedMS int64 `dynamodbav:"acknowledged_ms,omitempty"`
}

// WakeMS is when the record next needs a worker: the next attempt of a
// pending or retry_wait record, the lease expiry of a leased one. Records
// that cannot wake (succeeded, failed, parked) return false and drop out of
// the sparse wake index.
func (l Lease) WakeMS() (int64, bool) {
	if l.Parked {
		return 0, false
	}
	switch l.Status {
	case StatePending, StateRetryWait:
		return l.NextAttemptMS, true
	case StateLeased:
		return l.LeaseExpiresMS, true
	}
	return 0, false
}

// AttentionMS is set only for failed records that are not acknowledged:
// they need an operator and sit in the sparse attention index health reads.
func (l Lease) AttentionMS() (int64, bool) {
	if l.Status == StateFailed && l.AcknowledgedMS == 0 {
		return l.UpdatedMS, true
	}
	return 0, false
}

// EvidenceRecord is the content-free evidence state of one request, stored
// as evidence#<request_id> (docs/design.md "Release records").
type EvidenceRecord struct {
	RequestID        string `dynamodbav:"request_id"`
	EventID          string `dynamodbav:"event_id"`
	PlanID           string `dynamodbav:"plan_id"`
	JobID            string `dynamodbav:"job_id"`
	ResultSHA256     string `dynamodbav:"result_sha256"`
	EvidenceRevision string `dynamodbav:"evidence_revision"`
	Lease
	Version int64 `dynamodbav:"v"`
}

func (r *EvidenceRecord) Key() (string, string) { return r.EventID, SKEvidencePrefix + r.RequestID }
func (r *EvidenceRecord) RecordVersion() int64  { return r.Version }

// DeliveryRecord is the content-free state of the event's one delivery.
// The bundle is rebuilt from the result and approval records at send time
// and checked against BundleSHA256; Signature is the publication
// authority's signature over it.
type DeliveryRecord struct {
	EventID      string `dynamodbav:"event_id"`
	PlanID       string `dynamodbav:"plan_id"`
	SiteID       string `dynamodbav:"site_id"`
	DeliveryID   string `dynamodbav:"delivery_id"`
	BundleSHA256 string `dynamodbav:"bundle_sha256"`
	Signature    string `dynamodbav:"signature"`
	// KeyID names the publication key that made Signature, as
	// ApprovalRecord.KeyID.
	KeyID      string `dynamodbav:"key_id"`
	PreparedMS int64  `dynamodbav:"prepared_ms"`
	Lease
	// Announced is the delivery status whose event (delivery_ready:
	// localeflow.delivery.ready, delivered: localeflow.delivery.delivered)
	// was published, set by a conditional write after the publish
	// (Coordinator.SettleAnnounced); a redelivered message re-publishes the
	// current status only while it differs (docs/design.md "Release
	// outbox").
	Announced string `dynamodbav:"announced,omitempty"`
	Version   int64  `dynamodbav:"v"`
}

func (r *DeliveryRecord) Key() (string, string) { return r.EventID, SKDelivery }
func (r *DeliveryRecord) RecordVersion() int64  { return r.Version }

// BlockedRecord marks a release blocked for good: it cannot make progress
// without an operator (an evidence request failed for good, a delivery
// failed, a record failed its integrity check). It sits in the attention
// index; writing it takes the release's other records out of the wake
// index (Coordinator.block). Content-free: the code only.
type BlockedRecord struct {
	EventID   string `dynamodbav:"event_id"`
	Code      string `dynamodbav:"code"`
	BlockedMS int64  `dynamodbav:"blocked_ms"`
	// AcknowledgedMS is set by an operator's acknowledgement (localeflow
	// ack): the release stays blocked but leaves the attention index.
	AcknowledgedMS int64 `dynamodbav:"acknowledged_ms,omitempty"`
	Version        int64 `dynamodbav:"v"`
}

func (r *BlockedRecord) Key() (string, string) { return r.EventID, SKBlocked }
func (r *BlockedRecord) RecordVersion() int64  { return r.Version }

// ValidateBlockedRecord checks a stored blocked record.
func ValidateBlockedRecord(r *BlockedRecord) error {
	if r == nil || !core.ValidToken(r.EventID) || !core.ValidErrorCode(r.Code) || !core.ValidMillis(r.BlockedMS) || r.Version <= 0 ||
		(r.AcknowledgedMS != 0 && (!core.ValidMillis(r.AcknowledgedMS) || r.AcknowledgedMS < r.BlockedMS)) {
		return core.Fail(CodeRecordInvalid)
	}
	return nil
}

// Wake returns the wake and attention times of rec, if it has any. Besides
// the leased evidence and delivery records, a release that can make
// progress without any lease wakes through a succeeded job never claimed
// (JobRecord.AwaitingClaim) or the approval that completed the plan while
// no delivery is prepared (ApprovalRecord.AwaitingDelivery). A failed job
// sits in the attention index: its release cannot be delivered until the
// job is run again upstream, so an operator must know.
func Wake(rec Record) (wakeMS int64, wakes bool, attentionMS int64, attention bool) {
	var l Lease
	switch r := rec.(type) {
	case *EvidenceRecord:
		l = r.Lease
	case *DeliveryRecord:
		l = r.Lease
	case *JobRecord:
		if r.Status == JobFailed {
			return 0, false, r.ReceivedMS, r.AcknowledgedMS == 0
		}
		return max(r.ReceivedMS, r.NotBeforeMS), r.AwaitingClaim && r.Status == JobSucceeded, 0, false
	case *ApprovalRecord:
		return r.ApprovedMS, r.AwaitingDelivery, 0, false
	case *BlockedRecord:
		return 0, false, r.BlockedMS, r.AcknowledgedMS == 0
	default:
		return 0, false, 0, false
	}
	wakeMS, wakes = l.WakeMS()
	attentionMS, attention = l.AttentionMS()
	return
}

// NewRecord returns a zero record of the kind sort key sk names, or nil for
// an unknown key; stores decode items into it.
func NewRecord(sk string) Record {
	switch {
	case sk == SKPlan:
		return &PlanRecord{}
	case sk == SKDelivery:
		return &DeliveryRecord{}
	case sk == SKBlocked:
		return &BlockedRecord{}
	case strings.HasPrefix(sk, SKJobPrefix):
		return &JobRecord{}
	case strings.HasPrefix(sk, SKSourcePrefix):
		return &SourceRecord{}
	case strings.HasPrefix(sk, SKResultPrefix):
		return &ResultRecord{}
	case strings.HasPrefix(sk, SKEvidencePrefix):
		return &EvidenceRecord{}
	case strings.HasPrefix(sk, SKApprovalPrefix):
		return &ApprovalRecord{}
	case strings.HasPrefix(sk, SKAckPrefix):
		return &AckRecord{}
	case sk == SKTally:
		return &TallyRecord{}
	}
	return nil
}
