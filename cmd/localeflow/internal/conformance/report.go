// Package conformance checks a team's own CMS or evidence provider from
// the outside, as localeflow would talk to it, against what
// docs/integrating.md says a peer must verify and answer (`localeflow
// conformance cms|evidence`). Each check has a stable name and a level
// (MUST, SHOULD); a report holds one line per check: PASS, FAIL (with a
// code and the HTTP status seen) or SKIP (with why).
//
// It reuses what ships: the strict lifecycle parser (core/lifecycle), the
// evidence response validation and receipt verifiers (core/release), the
// request signing (signing) and the peer-side checks and derivations
// (peer). It never prints key material: details carry statuses,
// codes and ids only.
package conformance

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Levels of a check (RFC 2119 words of docs/integrating.md).
const (
	Must   = "MUST"
	Should = "SHOULD"
)

// Results of a check.
const (
	Pass = "PASS"
	Fail = "FAIL"
	Skip = "SKIP"
)

// Exit codes of a report (docs/integrating.md "Checking your servers").
const (
	ExitOK          = 0 // every check that ran passed
	ExitMustFailed  = 1 // a MUST check failed
	ExitUnreachable = 3 // the server could not be reached at all
	ExitShould      = 4 // every MUST check passed, a SHOULD check failed
)

// Codes of the checker itself (a check's failure code otherwise names the
// peer check, or is localeflow's code for what it refuses).
const (
	CodeUnreachable     = "conformance.unreachable"
	CodeStatus          = "conformance.status_unexpected"
	CodeNotRefused      = "conformance.not_refused"
	CodeWrongRefusal    = "conformance.refusal_status"
	CodeRetryAfter      = "conformance.retry_after_invalid"
	CodeNotIdempotent   = "conformance.delivery_not_idempotent"
	CodeSignature       = "conformance.answer_signature_invalid"
	CodeBusyNotBusy     = "conformance.busy_change_answered"
	CodeRequestBuild    = "conformance.request_build_failed"
	CodeReviewerUnbound = "conformance.reviewer_unbound"
)

// Result is one check's line.
type Result struct {
	Check  string `json:"check"`
	Level  string `json:"level"`
	Result string `json:"result"`
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Report is the outcome of one run.
type Report struct {
	Server      string   `json:"server"` // "cms" or "evidence"
	Checks      []Result `json:"checks"`
	Unreachable bool     `json:"unreachable,omitempty"`
}

// Exit is the report's exit code.
func (r Report) Exit() int {
	if r.Unreachable {
		return ExitUnreachable
	}
	should := false
	for _, c := range r.Checks {
		if c.Result == Fail {
			if c.Level == Must {
				return ExitMustFailed
			}
			should = true
		}
	}
	if should {
		return ExitShould
	}
	return ExitOK
}

// Result returns the named check's line (Result "" when absent).
func (r Report) Result(check string) Result {
	for _, c := range r.Checks {
		if c.Check == check {
			return c
		}
	}
	return Result{}
}

func (r *Report) add(check, level, result, code, detail string) {
	r.Checks = append(r.Checks, Result{Check: check, Level: level, Result: result, Code: code, Detail: detail})
}

func (r *Report) pass(check, level, detail string) { r.add(check, level, Pass, "", detail) }

func (r *Report) fail(check, level, code, detail string) { r.add(check, level, Fail, code, detail) }

func (r *Report) skip(check, level, why string) { r.add(check, level, Skip, "", why) }

// unreachable reports a first request that got no answer: its check
// fails, every other check is skipped.
func (r *Report) unreachable(checks []struct{ Name, Level string }, err error) {
	r.Unreachable = true
	r.fail(checks[0].Name, checks[0].Level, CodeUnreachable, err.Error())
	for _, ch := range checks[1:] {
		r.skip(ch.Name, ch.Level, "the server could not be reached")
	}
}

// refusal checks that a request was refused with want (0: any final
// 4xx, that is 400..499 but 429) and records the line.
func (r *Report) refusal(check, level string, got answer, want int, suggested string) {
	switch {
	case got.err != nil:
		r.fail(check, level, CodeUnreachable, got.err.Error())
	case want != 0 && got.status == want:
		r.pass(check, level, fmt.Sprintf("refused with %d", got.status))
	case want != 0 && got.status/100 == 4 && got.status != http.StatusTooManyRequests:
		r.fail(check, level, CodeWrongRefusal, fmt.Sprintf("refused with %d, the contract says %d", got.status, want))
	case want == 0 && got.status/100 == 4 && got.status != http.StatusTooManyRequests:
		d := fmt.Sprintf("refused with %d", got.status)
		if suggested != "" && !strings.Contains(suggested, fmt.Sprint(got.status)) {
			d += " (suggested: " + suggested + ")"
		}
		r.pass(check, level, d)
	default:
		d := fmt.Sprintf("answered %d", got.status)
		if want != 0 {
			d += fmt.Sprintf(", want %d", want)
		} else {
			d += ", want a final 4xx"
		}
		r.fail(check, level, CodeNotRefused, d)
	}
}

// runID is a fresh tag for the ids this run invents.
func runID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%d-%s", now.Unix(), hex.EncodeToString(b[:]))
}
