package release

import (
	"reflect"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
)

// The compact form holds every field of ApprovalRecord except those its
// body holds (filled on read) and Body and Sig under their names: a field
// added to ApprovalRecord must be added to compactApproval (or to the
// derived list), or a compact write would silently drop it.
func TestCompactFormHoldsEveryField(t *testing.T) {
	derived := map[string]bool{"Token": true, "PlanID": true, "TargetLocale": true, "ResultSHA256": true, "RequestID": true, "ApprovalID": true}
	rt, ct := reflect.TypeOf(ApprovalRecord{}), reflect.TypeOf(compactApproval{})
	for i := range rt.NumField() {
		f := rt.Field(i)
		c, ok := ct.FieldByName(f.Name)
		if derived[f.Name] {
			if ok {
				t.Errorf("%s is both in the body and in the compact form", f.Name)
			}
			continue
		}
		if !ok || c.Type != f.Type || c.Tag.Get("dynamodbav") != f.Tag.Get("dynamodbav") && f.Name != "Body" && f.Name != "Sig" {
			t.Errorf("ApprovalRecord.%s (%s) is not in the compact form as it is in the record", f.Name, f.Tag)
		}
	}
	if ct.NumField() != rt.NumField()-len(derived) {
		t.Errorf("compact form has %d fields, want %d", ct.NumField(), rt.NumField()-len(derived))
	}
}

func compactSample(t testing.TB) *ApprovalRecord {
	t.Helper()
	p := contract.ApprovalPayload{
		Schema: contract.ApprovalSchema, ApprovalID: "apv-" + strings.Repeat("a", 40), EventID: "evt-1", SiteID: "site-1", PlanID: "plan-1",
		JobID: "job-de-DE", TargetLocale: "de-DE", ResultSHA256: strings.Repeat("c", 64), EvidenceRequestID: "req-1",
		QualityReceiptSHA256: strings.Repeat("1", 64), ApprovedAtMS: 1000, ExpiresAtMS: 2000,
	}
	body, err := core.Canonical(p)
	if err != nil {
		t.Fatal(err)
	}
	a := &ApprovalRecord{EventID: "evt-1", PlanID: p.PlanID, JobID: p.JobID, TargetLocale: p.TargetLocale, ResultSHA256: p.ResultSHA256,
		RequestID: p.EvidenceRequestID, ApprovalID: p.ApprovalID, KeyID: "0123456789abcdef", ApprovedMS: 1000, ExpiresMS: 2000, Version: 1}
	a.SetSigned(body, make([]byte, 64))
	return a
}

// storedForm is a as a store reads it back: the compact form's fields only.
func storedForm(t testing.TB, a *ApprovalRecord) *ApprovalRecord {
	t.Helper()
	form, err := StoredForm(a)
	if err != nil {
		t.Fatal(err)
	}
	c := form.(*compactApproval)
	return &ApprovalRecord{EventID: c.EventID, JobID: c.JobID, Body: c.Body, Sig: c.Sig, KeyID: c.KeyID, ApprovedMS: c.ApprovedMS,
		ExpiresMS: c.ExpiresMS, AwaitingDelivery: c.AwaitingDelivery, Version: c.Version}
}

func TestOpenStoredFillsACompactApproval(t *testing.T) {
	want := compactSample(t)
	got := storedForm(t, want)
	if err := OpenStored(got, "evt-1"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// Malformed stored approvals are refused with the stored-row code, never
// a panic: a token beside the body, no body or signature, no key id, a
// signature of another length, a body
// that is not an approval payload or disagrees with the record's key or
// top-level fields.
func TestOpenStoredRefusesMalformedApprovals(t *testing.T) {
	for name, alter := range map[string]func(a *ApprovalRecord){
		"a token too":           func(a *ApprovalRecord) { a.Token = "v1.a.b" },
		"no key id":             func(a *ApprovalRecord) { a.KeyID = "" },
		"key id not an id":      func(a *ApprovalRecord) { a.KeyID = "key-1" },
		"body with a plan id":   func(a *ApprovalRecord) { a.PlanID = "plan-1" },
		"body with a request":   func(a *ApprovalRecord) { a.RequestID = "req-1" },
		"no body, no signature": func(a *ApprovalRecord) { a.Body, a.Sig = "", nil },
		"signature only":        func(a *ApprovalRecord) { a.Body = "" },
		"body only":             func(a *ApprovalRecord) { a.Sig = nil },
		"short signature":       func(a *ApprovalRecord) { a.Sig = a.Sig[:63] },
		"long signature":        func(a *ApprovalRecord) { a.Sig = append(a.Sig, 0) },
		"body not json":         func(a *ApprovalRecord) { a.Body = a.Body[:len(a.Body)-1] },
		"body trailing data":    func(a *ApprovalRecord) { a.Body += "{}" },
		"body not utf-8":        func(a *ApprovalRecord) { a.Body = strings.Replace(a.Body, "de-DE", "de-\xff", 1) },
		"body another schema":   func(a *ApprovalRecord) { a.Body = strings.Replace(a.Body, contract.ApprovalSchema, "x", 1) },
		"body another event":    func(a *ApprovalRecord) { a.Body = strings.Replace(a.Body, `"evt-1"`, `"evt-2"`, 1) },
		"body another job":      func(a *ApprovalRecord) { a.JobID = "job-fr-FR" },
		"approved_ms disagrees": func(a *ApprovalRecord) { a.ApprovedMS++ },
		"expires_ms disagrees":  func(a *ApprovalRecord) { a.ExpiresMS-- },
		"body array":            func(a *ApprovalRecord) { a.Body = "[]" },
		"body bad result":       func(a *ApprovalRecord) { a.Body = strings.Replace(a.Body, strings.Repeat("c", 64), "c", 1) },
	} {
		t.Run(name, func(t *testing.T) {
			a := storedForm(t, compactSample(t))
			alter(a)
			if err := OpenStored(a, "evt-1"); !core.HasCode(err, CodeStoredApprovalInvalid) {
				t.Fatalf("%v, want %s", err, CodeStoredApprovalInvalid)
			}
		})
	}
	// A token alone (the token layout, never released) is refused.
	tok := &ApprovalRecord{EventID: "evt-1", JobID: "j", Token: "v1.a.b", KeyID: "0123456789abcdef", Version: 1}
	if err := OpenStored(tok, "evt-1"); !core.HasCode(err, CodeStoredApprovalInvalid) {
		t.Fatalf("a token alone: %v", err)
	}
}

// FuzzOpenStoredApproval: any stored approval opens without panicking,
// with the stored-row code or not at all; one that opens holds the token
// rebuilt from its stored bytes and writes back unchanged.
func FuzzOpenStoredApproval(f *testing.F) {
	a := compactSample(f)
	f.Add(a.Body, a.Sig, "", "evt-1", "job-de-DE", int64(1000), int64(2000))
	f.Add(a.Body, a.Sig[:10], "", "evt-1", "job-de-DE", int64(1000), int64(2000))
	f.Add("", []byte(nil), "v1.a.b", "evt-1", "job-1", int64(1), int64(2))
	f.Add(`{"schema":"localeflow.approval.v1","event_id":"evt-1","job_id":"j"}`, make([]byte, 64), "", "evt-1", "j", int64(0), int64(0))
	f.Fuzz(func(t *testing.T, body string, sig []byte, token, eventID, jobID string, approved, expires int64) {
		rec := &ApprovalRecord{EventID: eventID, JobID: jobID, Body: body, Sig: sig, Token: token, KeyID: "0123456789abcdef", ApprovedMS: approved, ExpiresMS: expires, Version: 1}
		err := OpenStored(rec, "evt-1")
		if err != nil {
			if !core.HasCode(err, CodeStoredApprovalInvalid) {
				t.Fatalf("code %q", core.CodeOf(err))
			}
			return
		}
		if rec.Token != BuildToken([]byte(body), sig) || rec.EventID != "evt-1" || rec.ApprovalID == "" {
			t.Fatalf("opened: %+v", rec)
		}
		if _, err := StoredForm(rec); err != nil {
			t.Fatalf("an opened approval does not write back: %v", err)
		}
	})
}
