package memstore

import (
	"context"
	"sort"
	"sync"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
)

// Store is an in-memory monitor.Store. The zero value is not usable; call
// New.
type Store struct {
	mu      sync.Mutex
	records map[string]monitor.Record
}

var _ monitor.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store { return &Store{records: map[string]monitor.Record{}} }

func clone(r monitor.Record) monitor.Record {
	r.Lifecycle = append([]byte(nil), r.Lifecycle...)
	if len(r.Lifecycle) == 0 {
		r.Lifecycle = nil
	}
	return r
}

// Create implements monitor.Store (the record is stored with
// monitor.SchemaVersion).
func (s *Store) Create(_ context.Context, rec monitor.Record) (monitor.Record, bool, error) {
	rec.SchemaVersion = monitor.SchemaVersion
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.records[rec.EventID]; ok {
		return clone(cur), false, nil
	}
	s.records[rec.EventID] = clone(rec)
	return clone(rec), true, nil
}

// Get implements monitor.Store.
func (s *Store) Get(_ context.Context, eventID string) (monitor.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[eventID]
	if !ok {
		return monitor.Record{}, core.Fail(monitor.CodeEventMissing)
	}
	return clone(cur), nil
}

// Due implements monitor.Store.
func (s *Store) Due(ctx context.Context, nowMS int64, limit int) ([]string, error) {
	ids, _, err := s.DuePage(ctx, nowMS, limit, monitor.DueCursor{})
	return ids, err
}

// DuePage implements monitor.Store with one ordering (partition 0).
func (s *Store) DuePage(_ context.Context, nowMS int64, limit int, cursor monitor.DueCursor) ([]string, monitor.DueCursor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit <= 0 || cursor.Done[0] {
		return nil, cursor, nil
	}
	after, started := cursor.After[0]
	var all []monitor.DueEntry
	for id, r := range s.records {
		wake, ok := r.WakeMS()
		e := monitor.DueEntry{WakeMS: wake, EventID: id}
		if ok && wake <= nowMS && (!started || after.Less(e)) {
			all = append(all, e)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Less(all[j]) })
	n := min(limit, len(all))
	ids := make([]string, 0, n)
	for _, e := range all[:n] {
		ids = append(ids, e.EventID)
	}
	if n == 0 {
		return ids, cursor.Advance(0, nil, true), nil
	}
	return ids, cursor.Advance(0, &all[n-1], false), nil
}

// Claim implements monitor.Store.
func (s *Store) Claim(_ context.Context, eventID string, lease monitor.Lease) (monitor.Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[eventID]
	if !ok {
		return monitor.Record{}, false, core.Fail(monitor.CodeEventMissing)
	}
	if !monitor.Claimable(cur, lease.NowMS) {
		return clone(cur), false, nil
	}
	next := monitor.ApplyClaim(cur, lease)
	s.records[eventID] = next
	return clone(next), true, nil
}

// Transition implements monitor.Store.
func (s *Store) Transition(_ context.Context, f monitor.Fence, u monitor.Update) (monitor.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[f.EventID]
	if ok && cur.SchemaVersion != monitor.SchemaVersion {
		return monitor.Record{}, core.Fail(monitor.CodeSchemaAltered)
	}
	if err := monitor.CheckFence(cur, ok, f); err != nil {
		return monitor.Record{}, err
	}
	next := monitor.ApplyUpdate(cur, u)
	s.records[f.EventID] = next
	return clone(next), nil
}

// Hint implements monitor.Store.
func (s *Store) Hint(_ context.Context, h monitor.Hint) (monitor.Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[h.EventID]
	if !ok {
		return monitor.Record{}, false, core.Fail(monitor.CodeEventMissing)
	}
	if !monitor.Hintable(cur, h) {
		return clone(cur), false, nil
	}
	next := monitor.ApplyHint(cur, h)
	s.records[h.EventID] = next
	return clone(next), true, nil
}

// MarkInvalid implements monitor.Store.
func (s *Store) MarkInvalid(_ context.Context, eventID string, nowMS int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[eventID]
	if !ok || cur.SchemaVersion != monitor.SchemaVersion || monitor.MarkedInvalid(cur) {
		return nil
	}
	s.records[eventID] = monitor.ApplyInvalid(cur, nowMS)
	return nil
}

// Owed implements monitor.Store.
func (s *Store) Owed(_ context.Context, beforeMS int64, limit int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []monitor.Record
	for _, r := range s.records {
		if r.SchemaVersion == monitor.SchemaVersion && r.OutboxMS != 0 && r.OutboxMS <= beforeMS {
			all = append(all, r)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].OutboxMS != all[j].OutboxMS {
			return all[i].OutboxMS < all[j].OutboxMS
		}
		return all[i].EventID < all[j].EventID
	})
	ids := make([]string, 0, min(limit, len(all)))
	for _, r := range all[:min(max(limit, 0), len(all))] {
		ids = append(ids, r.EventID)
	}
	return ids, nil
}

// Announced implements monitor.Store.
func (s *Store) Announced(_ context.Context, eventID string, finishedMS int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[eventID]
	if ok && cur.SchemaVersion == monitor.SchemaVersion && cur.OutboxMS == finishedMS {
		cur.OutboxMS = 0
		s.records[eventID] = cur
	}
	return nil
}

// Census implements monitor.Store (a record of another schema version is
// always listed, as the DynamoDB store lists one its wake index holds).
func (s *Store) Census(_ context.Context) ([]monitor.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []monitor.Record
	for _, r := range s.records {
		if _, wakes := r.WakeMS(); wakes || r.NeedsAttention() || r.SchemaVersion != monitor.SchemaVersion {
			out = append(out, clone(r))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].EventID < out[j].EventID })
	return out, nil
}

// Tamper rewrites a stored record in place, bypassing every condition, so
// tests can plant impossible or corrupted records (the map key stays
// eventID, as a DynamoDB item keeps its key). It reports whether the
// record existed.
func (s *Store) Tamper(eventID string, edit func(*monitor.Record)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[eventID]
	if !ok {
		return false
	}
	edit(&cur)
	s.records[eventID] = cur
	return true
}

// Len is the number of records.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}
