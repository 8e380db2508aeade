package memstore

import (
	"sort"
	"time"
)

// DeleteExpired is DynamoDB's TTL deletion on the memory store: a finished
// record that needs no attention gets expires_at = its last write plus
// retention (adapters/monitordb sets it with the finishing write), and
// DynamoDB deletes it at some time after that, never before; lag chooses
// that time per record. It returns the deleted event ids, sorted.
func (s *Store) DeleteExpired(now time.Time, retention time.Duration, lag func(eventID string) time.Duration) []string {
	if retention <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, r := range s.records {
		if !r.State.Final() || r.AttentionWorthy() {
			continue
		}
		expires := time.Unix((r.UpdatedMS+retention.Milliseconds())/1000, 0)
		if expires.Add(lag(id)).After(now) {
			continue
		}
		delete(s.records, id)
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
