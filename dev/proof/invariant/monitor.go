package invariant

import (
	"context"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/topology"
)

// monitorReaders bounds the concurrent consistent reads of monitor records.
const monitorReaders = 16

func checkMonitor(ctx context.Context, o Options, c *collector, rep *Report) error {
	table := o.MonitorTable
	items, err := scan(ctx, o.DB, table, o.Segments)
	if err != nil {
		return err
	}
	store, err := monitordb.New(o.DB, table)
	if err != nil {
		return fmt.Errorf("invariant: %w", err)
	}
	byID := map[string]map[string]types.AttributeValue{}
	for _, it := range items {
		id := str(it, topology.AttrEventID)
		if !core.ValidToken(id) {
			// adapters/opsdb keeps requeue and ack journals ("requeue#<id>", "ack#<id>") in
			// this table; they are not monitor records.
			continue
		}
		byID[id] = it
	}
	rep.MonitorItems = len(byID)
	recs, err := readRecords(ctx, store, byID)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	for id, it := range byID {
		rec := recs[id]
		mu.Lock()
		rep.MonitorStates[rec.State]++
		mu.Unlock()
		checkMonitorItem(c, table, id, it, rec, o)
	}
	wake, err := queryIndex(ctx, o.DB, table, topology.IndexWake, topology.AttrWakeShard, monitorKey)
	if err != nil {
		return err
	}
	attention, err := queryIndex(ctx, o.DB, table, topology.IndexAttention, topology.AttrAttentionShard, monitorKey)
	if err != nil {
		return err
	}
	indexAgrees(c, table, topology.IndexWake, topology.AttrWakeMS, wake, byIndexKey(byID))
	indexAgrees(c, table, topology.IndexAttention, topology.AttrAttentionMS, attention, byIndexKey(byID))
	return nil
}

func monitorKey(it map[string]types.AttributeValue) indexKey {
	return indexKey{pk: str(it, topology.AttrEventID)}
}

func byIndexKey(byID map[string]map[string]types.AttributeValue) map[indexKey]map[string]types.AttributeValue {
	out := make(map[indexKey]map[string]types.AttributeValue, len(byID))
	for id, it := range byID {
		out[indexKey{pk: id}] = it
	}
	return out
}

// indexAgrees checks that the sparse index holds exactly the items that
// carry keyAttr (its sort key).
func indexAgrees(c *collector, table, index, keyAttr string, inIndex map[indexKey]bool, items map[indexKey]map[string]types.AttributeValue) {
	for k, it := range items {
		_, carries := it[keyAttr]
		if carries != inIndex[k] {
			c.add(table, k.String(), RuleIndexContents, "index %s: item carries keys %v, found by Query %v", index, carries, inIndex[k])
		}
	}
	for k := range inIndex {
		if _, ok := items[k]; !ok {
			c.add(table, k.String(), RuleIndexContents, "index %s holds a key with no item", index)
		}
	}
}

func (k indexKey) String() string {
	if k.sk == "" {
		return k.pk
	}
	return k.pk + "/" + k.sk
}

// readRecords reads each record back through the monitor's store.
func readRecords(ctx context.Context, store *monitordb.Store, byID map[string]map[string]types.AttributeValue) (map[string]monitor.Record, error) {
	ids := make(chan string)
	out := make(map[string]monitor.Record, len(byID))
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range monitorReaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				rec, err := store.Get(ctx, id)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("invariant: read monitor record %s: %w", id, err)
				}
				out[id] = rec
				mu.Unlock()
			}
		}()
	}
	for id := range byID {
		ids <- id
	}
	close(ids)
	wg.Wait()
	return out, firstErr
}

func checkMonitorItem(c *collector, table, id string, it map[string]types.AttributeValue, rec monitor.Record, o Options) {
	if _, err := monitor.Validate(rec); err != nil {
		c.add(table, id, RuleMonitorInvalid, "%s (state %q, corrupt %v)", core.CodeOf(err), rec.State, rec.Corrupt)
	}
	state := monitor.State(str(it, "state"))
	shard := int64(monitordb.Shard(id))
	nextPoll, _ := num(it, "next_poll_ms")
	wakeShard, hasWakeShard := num(it, topology.AttrWakeShard)
	wakeMS, hasWakeMS := num(it, topology.AttrWakeMS)
	_, hasOutShard := num(it, topology.AttrOutboxShard)
	outMS, hasOutMS := num(it, topology.AttrOutboxMS)
	// An owed outcome in the wake index (docs/design.md "Owed outcomes in
	// the wake index"): a final record with outbox_ms keeps the wake keys
	// its claim left (or its outbox key), at most its outbox key.
	owedInWake := state.Final() && hasOutMS
	switch {
	case owedInWake && (!hasWakeShard || !hasWakeMS || wakeShard != shard || wakeMS > outMS):
		c.add(table, id, RuleFinalWakes, "state %s owes outcome %d: wake keys (%v,%v) at (%d,%d), want shard %d at most the outbox key",
			state, outMS, hasWakeShard, hasWakeMS, wakeShard, wakeMS, shard)
	case owedInWake:
	case state.Final() && (hasWakeShard || hasWakeMS):
		c.add(table, id, RuleFinalWakes, "state %s carries wake keys", state)
	case state.CanWake() && (!hasWakeShard || !hasWakeMS):
		c.add(table, id, RuleWakeKeys, "state %s without wake keys", state)
	case state.CanWake() && (wakeShard != shard || wakeMS != nextPoll):
		// Leased records too: the claim leaves the wake key at next_poll_ms.
		c.add(table, id, RuleWakeKeys, "wake (%d,%d), want (%d, next_poll_ms %d)", wakeShard, wakeMS, shard, nextPoll)
	}
	attShard, hasAttShard := num(it, topology.AttrAttentionShard)
	_, hasAttMS := num(it, topology.AttrAttentionMS)
	remote := str(it, "remote_status")
	acked, _ := num(it, "acknowledged_ms")
	needs := monitor.Record{State: state, RemoteStatus: remote, AcknowledgedMS: acked}.NeedsAttention()
	if needs != (hasAttShard && hasAttMS) || hasAttShard != hasAttMS || (needs && attShard != shard) {
		c.add(table, id, RuleAttentionKeys, "state %s remote %q: attention keys (%v,%v) shard %d", state, remote, hasAttShard, hasAttMS, attShard)
	}
	updated, _ := num(it, "updated_ms")
	switch {
	case hasOutShard:
		// The monitor table has no outbox index.
		c.add(table, id, RuleOutboxKeys, "carries outbox_shard")
	case hasOutMS && !state.Final():
		c.add(table, id, RuleOutboxKeys, "state %s carries outbox_ms %d", state, outMS)
	case hasOutMS && outMS != updated:
		c.add(table, id, RuleOutboxKeys, "state %s outbox_ms %d, want a final record at updated_ms %d", state, outMS, updated)
	case hasOutMS && o.OutcomesAnnounced:
		c.add(table, id, RuleOutcomeOwed, "state %s: outcome of %d never announced", state, outMS)
	}
	attempts, _ := num(it, "poll_attempts")
	failures, _ := num(it, "consecutive_failures")
	maxFailures, _ := num(it, "max_consecutive_failures")
	if failures > maxFailures || failures > attempts || attempts < 0 {
		c.add(table, id, RuleAttempts, "poll_attempts %d consecutive_failures %d max %d", attempts, failures, maxFailures)
	}
	if o.MaxPollAttempts > 0 && attempts > int64(o.MaxPollAttempts) {
		c.add(table, id, RuleAttempts, "poll_attempts %d above the scenario's bound %d", attempts, o.MaxPollAttempts)
	}
	if state == monitor.StatePending && attempts != 0 {
		c.add(table, id, RuleAttempts, "pending with %d poll attempts", attempts)
	}
	contentFree(c, table, id, it, o.Texts)
	// The lifecycle attribute is stored compressed: look into the snapshot
	// the store decoded from it as well.
	if t, ok := findText(&types.AttributeValueMemberS{Value: string(rec.Lifecycle)}, o.Texts); ok {
		c.add(table, id, RuleContentFree, "lifecycle snapshot holds a text the test used (%d bytes, sha256 %s)", len(t), core.SHA256Hex([]byte(t))[:12])
	}
}
