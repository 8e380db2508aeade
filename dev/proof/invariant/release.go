package invariant

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

func releaseKeyOf(it map[string]types.AttributeValue) indexKey {
	return indexKey{pk: str(it, topology.AttrPK), sk: str(it, topology.AttrSK)}
}

func checkRelease(ctx context.Context, o Options, c *collector, rep *Report) error {
	table := o.ReleaseTable
	items, err := scan(ctx, o.DB, table, o.Segments)
	if err != nil {
		return err
	}
	rep.ReleaseItems = len(items)
	byKey := make(map[indexKey]map[string]types.AttributeValue, len(items))
	snaps := map[string]*release.Snapshot{}
	for _, it := range items {
		k := releaseKeyOf(it)
		byKey[k] = it
		eventID, _ := strings.CutPrefix(k.pk, releasedb.PKPrefix)
		if !checkReleaseItem(c, table, k, it, o.Texts) {
			continue
		}
		rec, err := releasedb.Decode(it)
		if err != nil {
			c.add(table, k.String(), RuleReleaseInvalid, "%s", core.CodeOf(err))
			continue
		}
		snap := snaps[eventID]
		if snap == nil {
			s := release.NewSnapshot()
			snap = &s
			snaps[eventID] = snap
		}
		snap.Add(rec)
		if d, ok := rec.(*release.DeliveryRecord); ok {
			rep.DeliveryStates[d.Status]++
		}
	}
	ids := make([]string, 0, len(snaps))
	for id := range snaps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		checkCollection(c, table, id, snaps[id])
		if o.ApprovalKey != nil {
			for jobID, a := range snaps[id].Approvals {
				checkApprovalToken(c, table, releasedb.PK(id)+"/"+release.SKApprovalPrefix+jobID, a, o.ApprovalKey)
			}
		}
	}
	if o.Delivered != nil {
		checkDeliveries(c, table, snaps, o.Delivered)
	}
	wake, err := queryIndex(ctx, o.DB, table, topology.IndexWake, topology.AttrWakeShard, releaseKeyOf)
	if err != nil {
		return err
	}
	attention, err := queryIndex(ctx, o.DB, table, topology.IndexAttention, topology.AttrAttentionShard, releaseKeyOf)
	if err != nil {
		return err
	}
	indexAgrees(c, table, topology.IndexWake, topology.AttrWakeMS, wake, byKey)
	indexAgrees(c, table, topology.IndexAttention, topology.AttrAttentionMS, attention, byKey)
	return nil
}

// checkReleaseItem checks one item on its own; false when it cannot be
// used for the cross-item rules.
func checkReleaseItem(c *collector, table string, k indexKey, it map[string]types.AttributeValue, texts []string) bool {
	key := k.String()
	textRecord := strings.HasPrefix(k.sk, release.SKSourcePrefix) || strings.HasPrefix(k.sk, release.SKResultPrefix)
	if !textRecord {
		contentFree(c, table, key, it, texts)
	}
	evidence := strings.HasPrefix(k.sk, release.SKEvidencePrefix)
	if !evidence && k.sk != release.SKDelivery {
		// Release-level entries (a never-claimed job, the approval that
		// completed the plan, a blocked release) carry index keys exactly
		// when release.Wake says so; other records never do.
		wakes, attention := false, false
		if rec, err := releasedb.Decode(it); err == nil {
			_, wakes, _, attention = release.Wake(rec)
		}
		if _, carries := it[topology.AttrWakeShard]; carries != wakes {
			c.add(table, key, RuleWakeKeys, "a %s record carries wake keys = %v, its state says %v", k.sk, carries, wakes)
		}
		if _, carries := it[topology.AttrAttentionShard]; carries != attention {
			c.add(table, key, RuleAttentionKeys, "a %s record carries attention keys = %v, its state says %v", k.sk, carries, attention)
		}
		return true
	}
	l, valid := opsdb.DecodeRelease(it).Lease()
	if !valid {
		c.add(table, key, RuleReleaseInvalid, "record invalid or its index keys disagree with status %q", l.Status)
	}
	_, wakes := it[topology.AttrWakeMS]
	if l.Status.Final() && wakes {
		c.add(table, key, RuleFinalWakes, "status %s carries wake keys", l.Status)
	}
	if l.Attempts > l.MaxAttempts {
		c.add(table, key, RuleAttempts, "attempts %d > max %d", l.Attempts, l.MaxAttempts)
	}
	return valid
}

// checkCollection checks the rules between the records of one event.
func checkCollection(c *collector, table, eventID string, s *release.Snapshot) {
	key := func(sk string) string { return releasedb.PK(eventID) + "/" + sk }
	results := map[string]*release.Result{}
	for jobID, r := range s.Results {
		var res release.Result
		h, err := "", json.Unmarshal([]byte(r.ResultJSON), &res)
		if err == nil {
			h, err = release.ResultHash(res)
		}
		if err != nil || h != r.ResultSHA256 {
			c.add(table, key(release.SKResultPrefix+jobID), RuleHashes, "result_sha256 is not the hash of the stored result")
			continue
		}
		results[jobID] = &res
		if j := s.Jobs[jobID]; j == nil || j.Status != release.JobSucceeded || j.ResultSHA256 != r.ResultSHA256 {
			c.add(table, key(release.SKResultPrefix+jobID), RuleHashes, "result without a succeeded job record of the same hash")
		}
	}
	for jobID, src := range s.Sources {
		if core.SHA256Hex([]byte(src.Text)) != src.SourceSHA256 {
			c.add(table, key(release.SKSourcePrefix+jobID), RuleHashes, "source_sha256 is not the hash of the stored text")
		}
		if r := results[jobID]; r != nil && r.SourceSHA256 != src.SourceSHA256 {
			c.add(table, key(release.SKSourcePrefix+jobID), RuleHashes, "result and source disagree on source_sha256")
		}
	}
	if s.Plan == nil {
		if len(s.Evidence) > 0 || len(s.Approvals) > 0 || s.Delivery != nil {
			c.add(table, key(release.SKPlan), RuleEvidenceBinding, "evidence, approvals or delivery without a plan")
		}
		return
	}
	for reqID, ev := range s.Evidence {
		checkEvidenceBinding(c, table, key(release.SKEvidencePrefix+reqID), s, ev, results)
	}
	for jobID, a := range s.Approvals {
		checkApproval(c, table, key(release.SKApprovalPrefix+jobID), s, a, results)
	}
	checkBlocked(c, table, key, s)
	if d := s.Delivery; d != nil {
		for _, j := range s.Plan.Jobs {
			if s.Approvals[j.JobID] == nil {
				c.add(table, key(release.SKDelivery), RuleDeliveryPremature, "delivery prepared while job %s has no approval", j.JobID)
			} else if owedByEvidence(s, s.Approvals[j.JobID]) {
				c.add(table, key(release.SKDelivery), RuleDeliveryPremature, "delivery prepared while the approval of job %s is owed", j.JobID)
			}
		}
		if d.PlanID != s.Plan.PlanID || d.SiteID != s.Plan.Event.SiteID {
			c.add(table, key(release.SKDelivery), RuleDeliveryPremature, "delivery bound to another plan or site")
		}
	}
}

// checkBlocked: no record of a release blocked for good can wake.
func checkBlocked(c *collector, table string, key func(string) string, s *release.Snapshot) {
	if s.Blocked == nil {
		return
	}
	var recs []release.Record
	owed := map[string]bool{}
	for _, a := range s.Approvals {
		owed[a.RequestID] = owed[a.RequestID] || owedByEvidence(s, a)
	}
	for _, e := range s.Evidence {
		if owed[e.RequestID] {
			// The evidence record of an owed compact approval keeps its
			// wake until the event is settled (docs/design.md "Owed
			// events of compact approvals"); checkApproval reports it.
			continue
		}
		recs = append(recs, e)
	}
	for _, j := range s.Jobs {
		recs = append(recs, j)
	}
	for _, a := range s.Approvals {
		recs = append(recs, a)
	}
	if s.Delivery != nil {
		recs = append(recs, s.Delivery)
	}
	for _, r := range recs {
		if _, wakes, _, _ := release.Wake(r); wakes {
			_, sk := r.Key()
			c.add(table, key(sk), RuleBlockedWakes, "a record of a blocked release can wake")
		}
	}
}

func checkEvidenceBinding(c *collector, table, key string, s *release.Snapshot, ev *release.EvidenceRecord, results map[string]*release.Result) {
	job, ok := s.Plan.Job(ev.JobID)
	res := results[ev.JobID]
	src := s.Sources[ev.JobID]
	switch {
	case !ok || ev.PlanID != s.Plan.PlanID:
		c.add(table, key, RuleEvidenceBinding, "evidence for a job or plan the plan does not hold")
		return
	case res == nil || src == nil:
		c.add(table, key, RuleEvidenceBinding, "evidence without a stored result and source")
		return
	case s.Results[ev.JobID].ResultSHA256 != ev.ResultSHA256:
		// A newer result of the same job supersedes old evidence only
		// through a new request id; this one must still bind its result.
		c.add(table, key, RuleEvidenceBinding, "evidence result_sha256 differs from the job's result")
		return
	}
	req, err := release.BuildEvidenceRequest(ev.EventID, ev.PlanID, job, src.Text, res, ev.ResultSHA256, ev.EvidenceRevision)
	if err != nil || req.RequestID != ev.RequestID {
		c.add(table, key, RuleEvidenceBinding, "request id is not the hash of its binding")
	}
}

func checkApproval(c *collector, table, key string, s *release.Snapshot, a *release.ApprovalRecord, results map[string]*release.Result) {
	r := s.Results[a.JobID]
	if r == nil || results[a.JobID] == nil || r.ResultSHA256 != a.ResultSHA256 || a.PlanID != s.Plan.PlanID {
		c.add(table, key, RuleApproval, "approval of a result that is not the stored one")
		return
	}
	if results[a.JobID].TargetLocale != a.TargetLocale {
		c.add(table, key, RuleApproval, "approval for another target locale")
	}
	ev := s.Evidence[a.RequestID]
	switch {
	case ev == nil || ev.ResultSHA256 != a.ResultSHA256 || ev.JobID != a.JobID:
		c.add(table, key, RuleApproval, "approval without succeeded evidence of the same result")
	case owedByEvidence(s, a):
		// A compact approval whose event was never settled.
		c.add(table, key, RuleOutcomeOwed, "compact approval still owes its release.approved (evidence record %s)", ev.Status)
	case ev.Status != release.StateSucceeded:
		c.add(table, key, RuleApproval, "approval without succeeded evidence of the same result")
	}
	if a.ExpiresMS <= a.ApprovedMS || a.Token == "" {
		c.add(table, key, RuleApproval, "approval token or validity window missing")
	}
}

// checkDeliveries compares the delivery records with what the CMS
// received.
func checkDeliveries(c *collector, table string, snaps map[string]*release.Snapshot, delivered map[string][]string) {
	for eventID, ids := range delivered {
		distinct := map[string]bool{}
		for _, id := range ids {
			distinct[id] = true
		}
		key := releasedb.PK(eventID) + "/" + release.SKDelivery
		if len(distinct) > 1 {
			c.add(table, key, RuleDeliveredTwice, "the CMS accepted %d different deliveries for one event", len(distinct))
		}
		var d *release.DeliveryRecord
		if s := snaps[eventID]; s != nil {
			d = s.Delivery
		}
		for id := range distinct {
			if d == nil || d.DeliveryID != id {
				c.add(table, key, RuleDeliveryUnknown, "the CMS accepted delivery %s that no delivery record holds", id)
			}
		}
	}
	for eventID, s := range snaps {
		d := s.Delivery
		if d == nil || d.Status != release.StateSucceeded {
			continue
		}
		found := false
		for _, id := range delivered[eventID] {
			found = found || id == d.DeliveryID
		}
		if !found {
			c.add(table, releasedb.PK(eventID)+"/"+release.SKDelivery, RuleDeliveryLost, "delivery record succeeded but the CMS never accepted it")
		}
	}
}

// checkApprovalToken opens the approval's signed token with the approval
// authority's public key and compares what it binds with the record.
func checkApprovalToken(c *collector, table, key string, a *release.ApprovalRecord, pub ed25519.PublicKey) {
	payload, err := release.OpenToken(release.ApprovalContext, pub, a.Token)
	var p contract.ApprovalPayload
	if err == nil {
		err = json.Unmarshal(payload, &p)
	}
	if err != nil {
		c.add(table, key, RuleApprovalSignature, "approval token does not open with the approval key")
		return
	}
	if p.ApprovalID != a.ApprovalID || p.EventID != a.EventID || p.PlanID != a.PlanID || p.JobID != a.JobID ||
		p.TargetLocale != a.TargetLocale || p.ResultSHA256 != a.ResultSHA256 || p.EvidenceRequestID != a.RequestID ||
		p.ApprovedAtMS != a.ApprovedMS || p.ExpiresAtMS != a.ExpiresMS {
		c.add(table, key, RuleApprovalSignature, "signed approval binds other values than the stored record")
	}
}

// owedByEvidence: a's release.approved is owed through its evidence record
// (release.ApprovalOwed).
func owedByEvidence(s *release.Snapshot, a *release.ApprovalRecord) bool {
	return a != nil && release.ApprovalOwed(a, s.Evidence[a.RequestID])
}
