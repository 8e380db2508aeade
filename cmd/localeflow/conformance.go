package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/peer"
	"github.com/localeflow/localeflow/signing"
)

// envEventKeyHex is the poller's and coordinator's event key variable; the
// conformance check reads the same key set (hex[,hex…]).
const envEventKeyHex = "LOCALEFLOW_EVENT_KEY_HEX"

// Codes of `conformance event` itself (a check that cannot start).
const (
	codeConformanceRead = "cli.conformance.file_unreadable"
	codeConformanceJSON = "cli.conformance.not_an_event"
	// --plan names no plan.accepted event, or a FILE beside it is not a
	// job.completed.
	codeConformanceNotPlan = "cli.conformance.not_a_plan"
	codeConformanceNotJob  = "cli.conformance.not_a_job"
)

func init() {
	commandFlags["conformance"] = append(append(append([]string(nil), eventFlags...), cmsFlags...), evidenceFlags...)
	commandHelp["conformance"] = `usage: localeflow [global flags] conformance event [--detail-type DT] [--key-hex HEX[,HEX…]]
           [--now UNIX_S] [--max-age DURATION] [--accept-v1] [--plan PLAN_FILE] FILE...

Checks a producer's input events offline, exactly as the consuming function
would (same code, same error codes; docs/integrating.md "Checking your
producer"). Each FILE holds one event: the detail (then --detail-type is
required) or an EventBridge event with "detail-type" and "detail" (as a rule
delivers it; --detail-type, when given, must agree). The detail-types are
localeflow.change.dispatched, localeflow.plan.accepted,
localeflow.job.completed (signed) and localeflow.change.hint.
One line per check and file: PASS, FAIL (with the code) or SKIP.
  --detail-type DT   the detail-type the event is put with
  --key-hex HEX      the event key set, current first (default
                     $LOCALEFLOW_EVENT_KEY_HEX); needed for signed events
  --now UNIX_S       the verifier's time (default: now)
  --max-age D        the oldest v2 timestamp accepted, as the deployment's
                     LOCALEFLOW_EVENT_MAX_AGE (default: the functions' default,
                     ` + signing.DefaultEventMaxAge.String() + `); 5 min ahead at most
  --accept-v1        accept v1 signatures (no signed time), as a deployment with
                     LOCALEFLOW_EVENT_V1=accept does; without it (or
                     $LOCALEFLOW_EVENT_V1=accept) v1 is refused, as the deployed
                     functions refuse it by default
  --plan PLAN_FILE   plan-plus-jobs mode: PLAN_FILE is the localeflow.plan.accepted
                     event and each FILE one of its localeflow.job.completed
                     events; each job also gets the binding check
                     (docs/design.md "Producer rules: jobs and their plan"):
                     coordinator.job.plan_mismatch (another event or plan, a
                     job the plan does not hold), result.source_mismatch
                     (source_sha256 not the plan job's), result.binding_mismatch
                     (source_locale, target_locale or content_type not the
                     plan job's), coordinator.job.conflict (two files give
                     one job different results)
Checks: read, event (one JSON object; the detail-type known), envelope
(signature under one key, timestamp window, exact members), payload (the
function's strict parser), binding (with --plan), v2 (WARN only: a v1 signature accepted with
--accept-v1).
Exit (event): 0 every file passes, 1 a check failed, 2 usage.
` + conformanceServersHelp + globalHelp
}

// conformanceCheck is one line of the report.
type conformanceCheck struct {
	Name   string `json:"check"`
	Result string `json:"result"` // PASS, FAIL, SKIP, WARN
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
}

type conformanceFile struct {
	File       string             `json:"file"`
	DetailType string             `json:"detail_type,omitempty"`
	Pass       bool               `json:"pass"`
	Checks     []conformanceCheck `json:"checks"`
}

func (c *cli) conformance(rest []string) error {
	if len(rest) == 0 {
		return usagef("conformance: name what to check: event, cms or evidence")
	}
	if rest[0] != "event" {
		return usagef("conformance: %q is not a check (event, cms, evidence)", rest[0])
	}
	if err := c.onlyFlags("conformance event", eventFlags); err != nil {
		return err
	}
	files := rest[1:]
	if len(files) == 0 {
		return usagef("conformance event: give at least one FILE")
	}
	if c.detailType != "" && !isInputDetailType(c.detailType) {
		return usagef("conformance event: --detail-type %q is not an input detail-type (%s)", c.detailType, strings.Join(contract.InputDetailTypes, ", "))
	}
	acceptV1, err := c.eventV1Accepted()
	if err != nil {
		return err
	}
	check := peer.EventCheck{Now: time.Now(), RefuseV1: !acceptV1}
	if c.nowUnix != "" {
		n, err := strconv.ParseInt(c.nowUnix, 10, 64)
		if err != nil || n <= 0 {
			return usagef("conformance event: --now must be Unix seconds")
		}
		check.Now = time.Unix(n, 0)
	}
	if c.maxAge != "" {
		d, err := time.ParseDuration(c.maxAge)
		if err != nil || d <= 0 {
			return usagef("conformance event: --max-age must be a positive duration (96h, 720h)")
		}
		check.MaxAge = d
	}
	keyHex := firstNonEmpty(c.keyHex, strings.TrimSpace(c.getenv(envEventKeyHex)))
	if keyHex != "" {
		keys, err := secretkey.DecodeHexSet(keyHex, secretkey.MinBytes(signing.MinHMACKeyBytes))
		if err != nil {
			return usagef("conformance event: --key-hex: %v", err)
		}
		check.Keys = keys
	}
	var report []conformanceFile
	failed := false
	var plan *release.Plan
	if c.planFile != "" {
		r := c.conformanceEvent(check, c.planFile, keyHex != "")
		if r.Pass && r.DetailType != contract.DetailPlanAccepted {
			r.Pass = false
			r.Checks = append(r.Checks, conformanceCheck{Name: "plan", Result: "FAIL", Code: codeConformanceNotPlan, Detail: "--plan names a " + contract.DetailPlanAccepted + " event"})
		}
		if r.Pass {
			if se, err := readSignedEvent(check, c.planFile, c.detailType); err == nil && se.Plan != nil {
				plan = se.Plan
			}
		}
		failed = failed || !r.Pass
		report = append(report, r)
	}
	results := map[string]string{} // job id → result JSON of the succeeded jobs seen
	for _, f := range files {
		r := c.conformanceEvent(check, f, keyHex != "")
		if c.planFile != "" {
			c.bindingCheck(&r, check, plan, results)
		}
		failed = failed || !r.Pass
		report = append(report, r)
	}
	if c.jsonOut {
		if err := c.printJSON(report); err != nil {
			return err
		}
	} else {
		for _, r := range report {
			for _, ch := range r.Checks {
				line := fmt.Sprintf("%s  %s  %s", ch.Result, r.File, ch.Name)
				if ch.Code != "" {
					line += "  " + ch.Code
				}
				if ch.Detail != "" {
					line += "  (" + ch.Detail + ")"
				}
				fmt.Fprintln(c.out, line)
			}
		}
		pass := 0
		for _, r := range report {
			if r.Pass {
				pass++
			}
		}
		fmt.Fprintf(c.out, "%d of %d files pass\n", pass, len(report))
	}
	if failed {
		return badError{code: "cli.conformance.failed"}
	}
	return nil
}

// eventV1Accepted is the v1 policy of the check: the functions' default
// (refuse) unless --accept-v1 or $LOCALEFLOW_EVENT_V1=accept says the
// deployment accepts v1; another value of the variable is a usage error,
// as it fails the functions' cold start.
func (c *cli) eventV1Accepted() (bool, error) {
	if c.acceptV1 {
		return true, nil
	}
	switch v := contract.EventV1(strings.TrimSpace(c.getenv(contract.EnvEventV1))); v {
	case "", contract.EventV1Refuse:
		return false, nil
	case contract.EventV1Accept:
		return true, nil
	default:
		return false, usagef("conformance event: $%s must be %s or %s, not %q", contract.EnvEventV1, contract.EventV1Refuse, contract.EventV1Accept, v)
	}
}

// bindingCheck adds the "binding" check of a job file against the plan
// (the job↔plan rules of the coordinator, peer.CheckJobBinding).
func (c *cli) bindingCheck(r *conformanceFile, check peer.EventCheck, plan *release.Plan, results map[string]string) {
	add := func(result, code, detail string) {
		r.Checks = append(r.Checks, conformanceCheck{Name: "binding", Result: result, Code: code, Detail: detail})
	}
	switch {
	case !r.Pass:
		add("SKIP", "", "after a failed check")
		return
	case r.DetailType != contract.DetailJobCompleted:
		r.Pass = false
		add("FAIL", codeConformanceNotJob, "with --plan, each FILE is a "+contract.DetailJobCompleted+" event")
		return
	case plan == nil:
		add("SKIP", "", "the plan did not pass")
		return
	}
	se, err := readSignedEvent(check, r.File, c.detailType)
	if err != nil || se.Job == nil {
		r.Pass = false
		add("FAIL", core.CodeOf(err), "")
		return
	}
	why, err := peer.CheckJobBinding(plan, se.Job)
	if err != nil {
		r.Pass = false
		add("FAIL", core.CodeOf(err), why)
		return
	}
	if se.Job.Result != nil {
		if prev, seen := results[se.Job.JobID]; seen && prev != string(se.Job.ResultJSON) {
			r.Pass = false
			add("FAIL", release.CodeJobConflict, "another file gives this job another result: the first stored result wins, this one is refused")
			return
		}
		results[se.Job.JobID] = string(se.Job.ResultJSON)
	}
	add("PASS", "", "event, plan and job ids, source and locales are the plan job's")
}

// readSignedEvent reads and verifies a plan.accepted or job.completed
// file as the coordinator parses it.
func readSignedEvent(check peer.EventCheck, file, flagDT string) (release.SignedEvent, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return release.SignedEvent{}, core.Fail(codeConformanceRead)
	}
	detail, dt, why := eventDetail(raw, flagDT)
	if why != "" {
		return release.SignedEvent{}, core.Fail(codeConformanceJSON)
	}
	return release.ParseSignedEventWith(check, dt, detail)
}

func isInputDetailType(dt string) bool {
	for _, t := range contract.InputDetailTypes {
		if t == dt {
			return true
		}
	}
	return false
}

// conformanceEvent runs the checks of one file.
func (c *cli) conformanceEvent(check peer.EventCheck, file string, haveKeys bool) conformanceFile {
	r := conformanceFile{File: file}
	add := func(name, result, code, detail string) {
		r.Checks = append(r.Checks, conformanceCheck{Name: name, Result: result, Code: code, Detail: detail})
	}
	fail := func(name, code, detail string, skip ...string) conformanceFile {
		add(name, "FAIL", code, detail)
		for _, s := range skip {
			add(s, "SKIP", "", "after a failed check")
		}
		return r
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return fail("read", codeConformanceRead, "cannot read the file", "event", "envelope", "payload")
	}
	add("read", "PASS", "", fmt.Sprintf("%d bytes", len(raw)))
	detail, dt, why := eventDetail(raw, c.detailType)
	if why != "" {
		return fail("event", codeConformanceJSON, why, "envelope", "payload")
	}
	r.DetailType = dt
	add("event", "PASS", "", dt)
	signed := dt != contract.DetailChangeHint
	if signed && !haveKeys {
		return fail("envelope", "cli.conformance.key_missing", "set --key-hex or $"+envEventKeyHex, "payload")
	}
	res, envelopeErr, err := peer.OpenInputEvent(check, dt, detail)
	switch {
	case !signed:
		add("envelope", "SKIP", "", "unsigned detail-type")
	case err != nil && envelopeErr:
		return fail("envelope", core.CodeOf(err), "nothing in the payload is read before the signature verifies", "payload")
	default:
		add("envelope", "PASS", "", fmt.Sprintf("v%d signature verifies", res.Version))
	}
	if err != nil {
		return fail("payload", core.CodeOf(err), "")
	}
	add("payload", "PASS", "", "")
	if signed && res.Version == 1 {
		add("v2", "WARN", "", "v1 signature: accepted only where LOCALEFLOW_EVENT_V1=accept (the default refuses it); sign v2")
	}
	r.Pass = true
	return r
}

// eventDetail finds the detail and its detail-type in a file: a bare
// detail (detail-type from the flag) or an EventBridge event.
func eventDetail(raw []byte, flagDT string) (detail []byte, dt, why string) {
	var ev map[string]json.RawMessage
	if err := json.Unmarshal(raw, &ev); err != nil || ev == nil {
		return nil, "", "not one JSON object"
	}
	rawDT, hasDT := ev["detail-type"]
	rawDetail, hasDetail := ev["detail"]
	if !hasDT || !hasDetail {
		if flagDT == "" {
			return nil, "", "a bare detail: give --detail-type"
		}
		return bytes.TrimSpace(raw), flagDT, ""
	}
	if err := json.Unmarshal(rawDT, &dt); err != nil || !isInputDetailType(dt) {
		return nil, "", "detail-type is not a localeflow input"
	}
	if flagDT != "" && flagDT != dt {
		return nil, "", "the event's detail-type is not --detail-type"
	}
	var src string
	if s, ok := ev["source"]; ok && (json.Unmarshal(s, &src) != nil || src != contract.EventSource) {
		return nil, "", `source is not "localeflow"`
	}
	return bytes.TrimSpace(rawDetail), dt, ""
}
