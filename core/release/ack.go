package release

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/localeflow/localeflow/core"
)

// Acknowledgement codes (shared with the monitor's acknowledgement).
const (
	// CodeAckNotNeeded: no record named needs attention (nothing failed,
	// or the release is not blocked).
	CodeAckNotNeeded = "operator.ack.not_needed"
	// CodeAckLost: a record changed between the read and the write.
	CodeAckLost = "operator.ack.lost"
	// CodeAckReasonInvalid: the reason is empty, too long or not one line
	// of printable text.
	CodeAckReasonInvalid = "operator.ack.reason_invalid"
	// CodeAckActorInvalid: the caller's identity is not a printable ARN.
	CodeAckActorInvalid = "operator.ack.actor_invalid"
	// CodeAckKeyInvalid: the key naming a release record is not one the
	// health page shows (a request id, delivery, blocked or job#<id>).
	CodeAckKeyInvalid = "operator.ack.key_invalid"
	// CodeAckRecordMissing: the event has no release records, or no record
	// with the key given.
	CodeAckRecordMissing = "operator.ack.record_missing"
	// CodeAckTooMany: more records need attention than one transaction
	// can acknowledge; name them one by one with a key.
	CodeAckTooMany = "operator.ack.too_many"
)

// MaxAckReason is the longest acknowledgement reason (characters).
const MaxAckReason = 200

// maxActor is the longest identity (an IAM ARN is at most 2048 bytes).
const maxActor = 2048

// ValidAckReason reports whether reason is one line of 1..MaxAckReason
// printable characters.
func ValidAckReason(reason string) bool {
	if strings.TrimSpace(reason) == "" || !utf8.ValidString(reason) || utf8.RuneCountInString(reason) > MaxAckReason {
		return false
	}
	for _, r := range reason {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// ValidActor reports whether by is a printable ARN of at most 2048 bytes.
func ValidActor(by string) bool {
	if !strings.HasPrefix(by, "arn:") || len(by) > maxActor {
		return false
	}
	for _, r := range by {
		if r <= ' ' || r > '~' {
			return false
		}
	}
	return true
}

// AckRecord is the acknowledgement journal of one release record that
// needed attention (sort key ack#<the record's sort key>): who (the
// caller's AWS identity), when, why, and what was acknowledged (kind,
// state, code, the record's last write). Content-free but for the reason,
// operator text of one line that must not carry translation texts or
// secrets.
type AckRecord struct {
	EventID string `dynamodbav:"event_id" json:"event_id"`
	// AckedKey is the acknowledged record's sort key.
	AckedKey     string `dynamodbav:"acked_key" json:"key"`
	Count        int    `dynamodbav:"ack_count" json:"ack_count"`
	By           string `dynamodbav:"ack_by" json:"by"`
	AckMS        int64  `dynamodbav:"ack_ms" json:"acknowledged_ms"`
	Reason       string `dynamodbav:"ack_reason" json:"reason"`
	AckedState   string `dynamodbav:"acked_state" json:"state"`
	AckedCode    string `dynamodbav:"acked_error_code,omitempty" json:"error_code,omitempty"`
	AckedUpdated int64  `dynamodbav:"acked_updated_ms" json:"record_updated_ms"`
	Version      int64  `dynamodbav:"v" json:"version"`
}

func (r *AckRecord) Key() (string, string) { return r.EventID, SKAckPrefix + r.AckedKey }
func (r *AckRecord) RecordVersion() int64  { return r.Version }

// ValidateAckRecord checks a stored acknowledgement journal record.
func ValidateAckRecord(r *AckRecord) error {
	if r == nil || !core.ValidToken(r.EventID) || ackKind(r.AckedKey) == "" || r.Count <= 0 || !ValidActor(r.By) ||
		!core.ValidMillis(r.AckMS) || !ValidAckReason(r.Reason) || !core.ValidToken(r.AckedState) ||
		(r.AckedCode != "" && !core.ValidErrorCode(r.AckedCode)) || !core.ValidMillis(r.AckedUpdated) ||
		r.AckedUpdated > r.AckMS || r.Version <= 0 {
		return core.Fail(CodeRecordInvalid)
	}
	return nil
}

// Kinds of acknowledged release records (as the health page lists them).
const (
	AckKindEvidence = "evidence"
	AckKindDelivery = "delivery"
	AckKindJob      = "job"
	AckKindBlocked  = "blocked"
)

// ackKind is the kind of record a sort key names that can need attention,
// or "".
func ackKind(sk string) string {
	switch sk {
	case SKDelivery:
		return AckKindDelivery
	case SKBlocked:
		return AckKindBlocked
	}
	if id, ok := strings.CutPrefix(sk, SKEvidencePrefix); ok && core.ValidToken(id) {
		return AckKindEvidence
	}
	if id, ok := strings.CutPrefix(sk, SKJobPrefix); ok && core.ValidToken(id) {
		return AckKindJob
	}
	return ""
}

// AckSortKey turns the key an operator gives (the KEY column of the health
// page and `localeflow list`: an evidence request id, `delivery`,
// `blocked` or `job#<job id>`) into the record's sort key.
func AckSortKey(key string) (string, error) {
	sk := key
	if key != SKDelivery && key != SKBlocked && !strings.HasPrefix(key, SKJobPrefix) {
		sk = SKEvidencePrefix + key
	}
	if ackKind(sk) == "" {
		return "", core.Fail(CodeAckKeyInvalid)
	}
	return sk, nil
}

// AckedRecord is one release record an acknowledgement covered.
type AckedRecord struct {
	Kind    string    `json:"kind"`
	Journal AckRecord `json:"acknowledgement"`
	// Already is true when it was acknowledged before: nothing written.
	Already bool `json:"already_acknowledged"`
}

// attentionOf is what an acknowledgement needs of a record that can need
// attention: its state, code and last write, whether it is acknowledged,
// and the acknowledged copy at nowMS (version + 1).
type attentionOf struct {
	sk, kind, state, code string
	updatedMS, ackedMS    int64
	needs                 bool
	record                Record
	acked                 func(nowMS int64) Record
}

func attentionRecords(snap Snapshot) []attentionOf {
	var out []attentionOf
	lease := func(sk, kind string, l Lease, rec Record, acked func(int64) Record) {
		_, needs := l.AttentionMS()
		out = append(out, attentionOf{sk: sk, kind: kind, state: string(l.Status), code: l.LastErrorCode, updatedMS: l.UpdatedMS,
			ackedMS: l.AcknowledgedMS, needs: needs, record: rec, acked: acked})
	}
	for _, e := range snap.Evidence {
		_, sk := e.Key()
		lease(sk, AckKindEvidence, e.Lease, e, func(now int64) Record {
			n := *e
			n.AcknowledgedMS, n.Version = now, e.Version+1
			return &n
		})
	}
	if d := snap.Delivery; d != nil {
		lease(SKDelivery, AckKindDelivery, d.Lease, d, func(now int64) Record {
			n := *d
			n.AcknowledgedMS, n.Version = now, d.Version+1
			return &n
		})
	}
	for _, j := range snap.Jobs {
		_, sk := j.Key()
		_, _, _, needs := Wake(j)
		out = append(out, attentionOf{sk: sk, kind: AckKindJob, state: j.Status, code: j.ErrorCode, updatedMS: j.ReceivedMS,
			ackedMS: j.AcknowledgedMS, needs: needs, record: j, acked: func(now int64) Record {
				n := *j
				n.AcknowledgedMS, n.Version = now, j.Version+1
				return &n
			}})
	}
	if b := snap.Blocked; b != nil {
		_, _, _, needs := Wake(b)
		out = append(out, attentionOf{sk: SKBlocked, kind: AckKindBlocked, state: "blocked", code: b.Code, updatedMS: b.BlockedMS,
			ackedMS: b.AcknowledgedMS, needs: needs, record: b, acked: func(now int64) Record {
				n := *b
				n.AcknowledgedMS, n.Version = now, b.Version+1
				return &n
			}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].sk < out[j].sk })
	return out
}

// Acknowledge acknowledges the release records of eventID that need
// attention (a failed evidence, delivery or job record, the blocked
// record), as `by` at nowMS for reason: the one named by sk, or, when sk is
// empty, every one. One PutAll writes each record with acknowledged_ms
// (conditional on its version: it leaves the attention index, so health
// stops counting it) and its journal record ack#<sk>. A record already
// acknowledged is reported Already and nothing is written for it.
func Acknowledge(ctx context.Context, store Store, eventID, sk, by, reason string, nowMS int64) ([]AckedRecord, error) {
	switch {
	case !core.ValidToken(eventID):
		return nil, core.Fail(CodeEventIDInvalid)
	case sk != "" && ackKind(sk) == "":
		return nil, core.Fail(CodeAckKeyInvalid)
	case !ValidAckReason(reason):
		return nil, core.Fail(CodeAckReasonInvalid)
	case !ValidActor(by):
		return nil, core.Fail(CodeAckActorInvalid)
	case !core.ValidMillis(nowMS):
		return nil, core.Fail("operator.ack.time_invalid")
	}
	for attempt := 0; ; attempt++ {
		out, writes, err := planAck(ctx, store, eventID, sk, by, reason, nowMS)
		if err != nil || len(writes) == 0 {
			return out, err
		}
		err = store.PutAll(ctx, writes...)
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, ErrConflict) {
			return nil, fmt.Errorf("ack %s: %w", eventID, err)
		}
		if attempt == 1 {
			// Read again once: someone may have acknowledged it first.
			return nil, core.Wrap(CodeAckLost, false, fmt.Errorf("ack %s: the records changed since they were read", eventID))
		}
	}
}

func planAck(ctx context.Context, store Store, eventID, sk, by, reason string, nowMS int64) ([]AckedRecord, []Write, error) {
	snap, err := store.Load(ctx, eventID)
	if err != nil {
		return nil, nil, fmt.Errorf("ack %s: %w", eventID, err)
	}
	var out []AckedRecord
	var writes []Write
	found := false
	for _, a := range attentionRecords(snap) {
		if sk != "" && a.sk != sk {
			continue
		}
		found = true
		journal := snap.Acks[a.sk]
		switch {
		case a.ackedMS != 0:
			j := AckRecord{EventID: eventID, AckedKey: a.sk}
			if journal != nil {
				j = *journal
			}
			out = append(out, AckedRecord{Kind: a.kind, Journal: j, Already: true})
			continue
		case !a.needs:
			continue
		case nowMS < a.updatedMS:
			return nil, nil, core.Fail("operator.ack.clock_regressed")
		}
		j := AckRecord{EventID: eventID, AckedKey: a.sk, Count: 1, By: by, AckMS: nowMS, Reason: reason,
			AckedState: a.state, AckedCode: a.code, AckedUpdated: a.updatedMS, Version: 1}
		var prev int64
		if journal != nil {
			j.Count, j.Version, prev = journal.Count+1, journal.Version+1, journal.Version
		}
		writes = append(writes, Write{Rec: a.acked(nowMS), Prev: a.record.RecordVersion()}, Write{Rec: &j, Prev: prev})
		out = append(out, AckedRecord{Kind: a.kind, Journal: j})
	}
	switch {
	case !found && sk == "" && isEmpty(snap):
		return nil, nil, core.Fail(CodeAckRecordMissing)
	case !found && sk != "":
		return nil, nil, core.Fail(CodeAckRecordMissing)
	case len(out) == 0:
		return nil, nil, core.Fail(CodeAckNotNeeded)
	case len(writes) > MaxWrites:
		return nil, nil, core.Fail(CodeAckTooMany)
	}
	return out, writes, nil
}

func isEmpty(s Snapshot) bool {
	return s.Plan == nil && len(s.Jobs) == 0 && len(s.Sources) == 0 && len(s.Results) == 0 && len(s.Evidence) == 0 &&
		len(s.Approvals) == 0 && s.Delivery == nil && s.Blocked == nil && len(s.Acks) == 0
}
