package monitor

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
)

// Hint asks the store to move one watching change's next poll to NowMS.
// A hint carries no status: the poll that follows is the normal signed,
// validated poll, so a forged or replayed hint costs at most one poll per
// MinGapMS.
type Hint struct {
	EventID  string
	SiteID   string
	NowMS    int64
	MinGapMS int64
}

// Hintable reports whether the hint condition holds for r: r has this
// code's schema version and the hint's site, is watching, its next poll is
// later than NowMS, updated_ms ≤ NowMS, and no hint moved it during the
// last MinGapMS (hint_ms absent or ≤ NowMS − MinGapMS), and no wait the
// CMS asked for is running (wait_until_ms absent or ≤ NowMS). A record in
// retry_wait keeps its backoff, and the failure counters are never touched.
func Hintable(r Record, h Hint) bool {
	return r.SchemaVersion == SchemaVersion && r.SiteID == h.SiteID && r.State == StateWatching &&
		r.NextPollMS > h.NowMS && r.UpdatedMS <= h.NowMS && (r.HintMS == 0 || r.HintMS <= h.NowMS-h.MinGapMS) &&
		r.WaitUntilMS <= h.NowMS
}

// ApplyHint is the record a successful Store.Hint writes: next_poll_ms,
// hint_ms and updated_ms set to NowMS, nothing else changed.
func ApplyHint(r Record, h Hint) Record {
	r.NextPollMS = h.NowMS
	r.HintMS = h.NowMS
	r.UpdatedMS = h.NowMS
	return r
}

// HintDetail is the detail of a localeflow.change.hint event (the
// contract's ChangeHint): exactly {"event_id", "site_id"}, both tokens.
type HintDetail = contract.ChangeHint

// ParseHint reads a localeflow.change.hint detail. Anything but an object
// with exactly the string members event_id and site_id, both tokens, is
// lifecycle_monitor.hint_invalid.
func ParseHint(detail []byte) (HintDetail, error) {
	if _, err := core.CanonicalizeJSON(detail); err != nil {
		return HintDetail{}, core.Wrap(CodeHintInvalid, false, err)
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(detail, &top) != nil || top == nil || len(top) != 2 {
		return HintDetail{}, core.Fail(CodeHintInvalid)
	}
	var d HintDetail
	if !jsonString(top["event_id"], &d.EventID) || !jsonString(top["site_id"], &d.SiteID) ||
		!core.ValidToken(d.EventID) || !core.ValidToken(d.SiteID) {
		return HintDetail{}, core.Fail(CodeHintInvalid)
	}
	return d, nil
}

// HintResult is what a hint did. Advanced: the next poll moved to now and
// the caller should poll at once. Otherwise Code says why nothing changed
// (one of the lifecycle_monitor.hint_* codes).
type HintResult struct {
	EventID  string
	Advanced bool
	Code     string
	State    State
}

// Hint applies a change hint: for a watching change of site siteID whose
// next poll is later than now it moves the next poll to now with one
// conditional write (at most once per Config.HintMinGap per change). For
// any other record, or none, it changes nothing and reports why. It never
// reads the CMS; the caller polls (PollOnce) when Advanced.
func (s *Service) Hint(ctx context.Context, d HintDetail) (HintResult, error) {
	if !core.ValidToken(d.EventID) || !core.ValidToken(d.SiteID) {
		return HintResult{}, core.Fail(CodeHintInvalid)
	}
	now, err := s.now()
	if err != nil {
		return HintResult{}, err
	}
	h := Hint{EventID: d.EventID, SiteID: d.SiteID, NowMS: now, MinGapMS: s.cfg.HintMinGap.Milliseconds()}
	rec, ok, err := s.store.Hint(ctx, h)
	if core.HasCode(err, CodeEventMissing) {
		return HintResult{EventID: d.EventID, Code: CodeHintUnknown}, nil
	}
	if err != nil {
		return HintResult{}, fmt.Errorf("hint %s: %w", d.EventID, err)
	}
	if _, verr := s.validated(ctx, rec, now); verr != nil {
		// The write (if any) only moved a time; the record itself is
		// broken (marked failed) or of another schema version (left as it
		// is): nothing to poll.
		return HintResult{}, verr
	}
	res := HintResult{EventID: d.EventID, Advanced: ok, State: rec.State}
	if !ok {
		res.Code = hintRefusal(rec, h)
	}
	return res, nil
}

// hintRefusal names why Hintable(r, h) was false.
func hintRefusal(r Record, h Hint) string {
	switch {
	case r.SiteID != h.SiteID:
		return CodeHintSiteMismatch
	case r.State != StateWatching:
		return CodeHintNotWatching
	case r.NextPollMS <= h.NowMS:
		return CodeHintAlreadyDue
	case r.WaitUntilMS > h.NowMS:
		// A hinted poll met a Retry-After: the CMS's wait is not over.
		return CodeHintRetryAfter
	case r.UpdatedMS > h.NowMS:
		// Another writer (a poll finishing, a claim) moved the record after
		// this hint read its clock.
		return CodeHintRaced
	default:
		return CodeHintTooSoon
	}
}
