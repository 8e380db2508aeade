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
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/localeflow/localeflow/core"
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
	// CodeRefusalReason: refused, but with another code than the check's
	// (refused for another reason).
	CodeRefusalReason = "conformance.refusal_reason"
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

// variantAnswer is one broken request of a check and its answer.
type variantAnswer struct {
	name string
	got  answer
}

// refusal checks that a request was refused for the check's reason: a
// final 4xx (not 429), status want when want is not 0, and, when code is
// not "", the body's "code" is the check's code. A refusal with another
// code was refused for another reason (a CMS answering every delivery
// 409 "already delivered" refuses each broken bundle, and proves
// nothing).
func (r *Report) refusal(check, level string, got answer, want int, code string) {
	r.refusals(check, level, []variantAnswer{{"", got}}, want, code)
}

// refusals judges every variant of a check: it passes when each one is
// refused for the check's reason; the first that is not is named.
func (r *Report) refusals(check, level string, answers []variantAnswer, want int, code string) {
	for _, va := range answers {
		ok, fcode, why := refused(va.got, want, code)
		if !ok {
			if va.name != "" {
				why = va.name + ": " + why
			}
			r.fail(check, level, fcode, why)
			return
		}
	}
	d := "refused with " + statusList(answers)
	if code != "" {
		d += " and code " + code
	}
	if len(answers) > 1 {
		d = fmt.Sprintf("%d variants %s", len(answers), d)
	}
	r.pass(check, level, d)
}

func statusList(answers []variantAnswer) string {
	var seen []string
	for _, va := range answers {
		s := fmt.Sprint(va.got.status)
		if !slices.Contains(seen, s) {
			seen = append(seen, s)
		}
	}
	return strings.Join(seen, "/")
}

// refused judges one answer: whether it is the refusal wanted, else the
// failure code and why.
func refused(got answer, want int, code string) (bool, string, string) {
	wantText := "a final 4xx"
	if want != 0 {
		wantText = fmt.Sprint(want)
	}
	if code != "" {
		wantText += " with code " + code
	}
	switch {
	case got.err != nil:
		return false, CodeUnreachable, got.err.Error()
	case got.status/100 != 4 || got.status == http.StatusTooManyRequests:
		return false, CodeNotRefused, fmt.Sprintf("answered %d%s, want %s", got.status, codeNote(got), wantText)
	case want != 0 && got.status != want:
		return false, CodeWrongRefusal, fmt.Sprintf("refused with %d%s, the contract says %s", got.status, codeNote(got), wantText)
	case code != "" && answerCode(got) != code:
		return false, CodeRefusalReason, fmt.Sprintf("refused with %d%s, want code %s: refused for another reason", got.status, codeNote(got), code)
	}
	return true, "", ""
}

// answerCode is the "code" member of a JSON answer ("" when it has none,
// or none that is an error code).
func answerCode(a answer) string {
	var v struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(a.body, &v) != nil || !core.ValidErrorCode(v.Code) {
		return ""
	}
	return v.Code
}

// codeNote is " (code X)" or " (no code)" for a detail.
func codeNote(a answer) string {
	if c := answerCode(a); c != "" {
		return " (code " + c + ")"
	}
	return " (no code)"
}

// order sorts the report's lines into the order of names.
func (r *Report) order(names []struct{ Name, Level string }) {
	pos := map[string]int{}
	for i, n := range names {
		pos[n.Name] = i
	}
	slices.SortStableFunc(r.Checks, func(a, b Result) int { return pos[a.Check] - pos[b.Check] })
}

// runID is a fresh tag for the ids this run invents.
func runID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%d-%s", now.Unix(), hex.EncodeToString(b[:]))
}
