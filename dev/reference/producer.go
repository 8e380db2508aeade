package reference

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/signing"
)

// Producer defects: the mistakes a translation producer makes in its
// localeflow.plan.accepted and localeflow.job.completed events, each
// selected by its id (ProducerEvents). The first three pass every check of
// a single event and are refused only against the plan (the job↔plan
// bindings the coordinator enforces).
const (
	ProducerResultSourceMismatch = "result-source-mismatch" // the job's source_sha256 is not the plan job's (source edited after planning)
	ProducerResultLocaleMismatch = "result-locale-mismatch" // the job's target_locale is not the plan job's
	ProducerResultContentType    = "result-content-type"    // the job's content_type is not the plan job's
	ProducerJobNotInPlan         = "job-not-in-plan"        // a job id the plan does not hold
	ProducerJobOtherPlan         = "job-other-plan"         // the job names another plan_id
	ProducerJobOtherEvent        = "job-other-event"        // the job names another event_id
	ProducerTargetHash           = "target-hash"            // target_sha256 is not SHA-256 of the candidate
	ProducerStale                = "stale-timestamp"        // the envelope is signed 31 days ago
	ProducerFuture               = "future-timestamp"       // the envelope is signed 10 minutes ahead
	ProducerWrongDetailType      = "signed-as-other-type"   // the plan is signed as a job.completed
	ProducerWrongKey             = "wrong-key"              // signed with another key
	ProducerDuplicateJobIDs      = "duplicate-job-ids"      // two plan jobs share a job id
	ProducerTargetIsSource       = "target-is-source"       // a plan job's target locale is its source locale
	ProducerFloatInteger         = "float-integer"          // source_sequence spelled 7.0
	ProducerDuplicateMembers     = "duplicate-members"      // the plan payload repeats a member name
	ProducerEnvelopeExtra        = "envelope-extra-member"  // the envelope carries a fourth member
	ProducerResultTwice          = "result-twice"           // a job is completed twice with different results
)

// ProducerDefects lists the broken producers.
func ProducerDefects() []Defect {
	return []Defect{
		{"producer", ProducerResultSourceMismatch, "a job's source_sha256 is not its plan job's"},
		{"producer", ProducerResultLocaleMismatch, "a job's target_locale is not its plan job's"},
		{"producer", ProducerResultContentType, "a job's content_type is not its plan job's"},
		{"producer", ProducerJobNotInPlan, "a job the plan does not hold"},
		{"producer", ProducerJobOtherPlan, "a job naming another plan"},
		{"producer", ProducerJobOtherEvent, "a job naming another change"},
		{"producer", ProducerTargetHash, "target_sha256 not the candidate's"},
		{"producer", ProducerStale, "signed 31 days ago"},
		{"producer", ProducerFuture, "signed 10 minutes ahead"},
		{"producer", ProducerWrongDetailType, "the plan signed as a job.completed"},
		{"producer", ProducerWrongKey, "signed with another key"},
		{"producer", ProducerDuplicateJobIDs, "two plan jobs with one job id"},
		{"producer", ProducerTargetIsSource, "a plan job translating into its own source locale"},
		{"producer", ProducerFloatInteger, "source_sequence spelled 7.0"},
		{"producer", ProducerDuplicateMembers, "a plan payload with a repeated member"},
		{"producer", ProducerEnvelopeExtra, "an envelope with a fourth member"},
		{"producer", ProducerResultTwice, "a job completed twice with different results"},
	}
}

// ProducerEvents returns the localeflow.plan.accepted event and its
// localeflow.job.completed events (EventBridge events: "detail-type" and
// "detail") for a plan of three locales, as a producer with the defect
// (""for none) puts them, signed v2 with key at now.
func ProducerEvents(defect string, key []byte, now time.Time) (plan []byte, jobs [][]byte, err error) {
	if defect != "" && !producerKnown(defect) {
		return nil, nil, errors.New("reference: unknown producer defect " + defect)
	}
	const event, site, planID = "evt-producer-1", "site-berlin", "plan-producer-1"
	locales := []string{"de-DE", "fr-FR", "it-IT"}
	source := map[string]string{}
	type job struct{ id, src, target, text string }
	var planJobs []job
	for _, l := range locales {
		j := job{id: "job-" + l, src: "en-US", target: l, text: "Welcome to our shop <" + l + ">"}
		source[j.id] = j.text
		planJobs = append(planJobs, j)
	}
	if defect == ProducerDuplicateJobIDs {
		planJobs[2].id = planJobs[1].id
	}
	if defect == ProducerTargetIsSource {
		planJobs[2].target = planJobs[2].src
	}
	var pj []map[string]any
	for _, j := range planJobs {
		pj = append(pj, map[string]any{"job_id": j.id, "source": map[string]any{"locale": j.src, "text": j.text},
			"target": map[string]any{"locale": j.target}, "content_type": "page", "commercial_profile": nil})
	}
	planPayload, err := json.Marshal(map[string]any{
		"event": map[string]any{"event_id": event, "site_id": site, "website_version": "v2026.11.29", "source_sequence": 7},
		"plan":  map[string]any{"plan_id": planID, "jobs": pj},
	})
	if err != nil {
		return nil, nil, err
	}
	switch defect {
	case ProducerFloatInteger:
		planPayload = []byte(strings.Replace(string(planPayload), `"source_sequence":7`, `"source_sequence":7.0`, 1))
	case ProducerDuplicateMembers:
		planPayload = []byte(`{"plan":{"plan_id":"plan-other","jobs":[]},` + string(planPayload[1:]))
	}
	planDT := contract.DetailPlanAccepted
	signAs := planDT
	if defect == ProducerWrongDetailType {
		signAs = contract.DetailJobCompleted
	}
	if plan, err = producerEvent(defect, key, now, planDT, signAs, planPayload); err != nil {
		return nil, nil, err
	}
	for i, j := range planJobs[:len(locales)] {
		if defect == ProducerDuplicateJobIDs && i == 2 {
			break
		}
		candidate := "Willkommen <" + j.target + ">"
		r := map[string]any{
			"event_id": event, "plan_id": planID, "job_id": j.id, "status": "succeeded",
			"source_sha256": core.SHA256Hex([]byte(source[j.id])), "target_sha256": core.SHA256Hex([]byte(candidate)),
			"source_locale": j.src, "target_locale": j.target, "content_type": "page",
			"glossary_version": "gl-3", "policy_version": "pol-2",
			"provider":         map[string]any{"id": "mt-alpha", "model_id": "m-1", "model_version": "2026-10"},
			"software_version": "sw-1.4.0", "review_confidence": map[string]any{"level": "high"},
			"quality_profile": map[string]any{"tier": "standard"}, "commercial_review": nil,
			"human_review_required": false, "independent_review_required": false, "candidate": candidate,
		}
		if i == len(locales)-1 {
			// The defects of one job: the last locale's.
			switch defect {
			case ProducerResultSourceMismatch:
				r["source_sha256"] = core.SHA256Hex([]byte(source[j.id] + " (edited after the plan)"))
			case ProducerResultLocaleMismatch:
				r["target_locale"] = "de-AT"
			case ProducerResultContentType:
				r["content_type"] = "email"
			case ProducerJobNotInPlan:
				r["job_id"] = "job-nl-NL"
			case ProducerJobOtherPlan:
				r["plan_id"] = "plan-producer-0"
			case ProducerJobOtherEvent:
				r["event_id"] = "evt-producer-0"
			case ProducerTargetHash:
				r["target_sha256"] = core.SHA256Hex([]byte(candidate + " "))
			}
		}
		payload, err := json.Marshal(r)
		if err != nil {
			return nil, nil, err
		}
		ev, err := producerEvent(defect, key, now, contract.DetailJobCompleted, contract.DetailJobCompleted, payload)
		if err != nil {
			return nil, nil, err
		}
		jobs = append(jobs, ev)
		if defect == ProducerResultTwice && i == 0 {
			// A retry that translated again instead of re-sending.
			again := "Herzlich willkommen <" + j.target + ">"
			r["candidate"], r["target_sha256"] = again, core.SHA256Hex([]byte(again))
			payload, err := json.Marshal(r)
			if err != nil {
				return nil, nil, err
			}
			ev, err := producerEvent(defect, key, now, contract.DetailJobCompleted, contract.DetailJobCompleted, payload)
			if err != nil {
				return nil, nil, err
			}
			jobs = append(jobs, ev)
		}
	}
	return plan, jobs, nil
}

func producerKnown(id string) bool {
	for _, d := range ProducerDefects() {
		if d.ID == id {
			return true
		}
	}
	return false
}

// producerEvent signs payload v2 as detail-type signAs and wraps it in an
// EventBridge event of detail-type dt.
func producerEvent(defect string, key []byte, now time.Time, dt, signAs string, payload []byte) ([]byte, error) {
	switch defect {
	case ProducerStale:
		now = now.Add(-31 * 24 * time.Hour)
	case ProducerFuture:
		now = now.Add(10 * time.Minute)
	case ProducerWrongKey:
		key = []byte("not-the-event-key-0123456789abcdef")
	}
	ts := signing.EventTimestamp(now)
	detail := map[string]any{"payload": string(payload), "timestamp": ts, "signature": signing.SignEventV2(key, signAs, ts, payload)}
	if defect == ProducerEnvelopeExtra {
		detail["producer"] = "mt-alpha"
	}
	return json.Marshal(map[string]any{"detail-type": dt, "detail": detail})
}
