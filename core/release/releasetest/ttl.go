package releasetest

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
)

// ExpireTexts sets the expiry of the event's source and result records
// that have none to at, as adapters/releasedb.TextExpirer sets their
// DynamoDB TTL attribute (a record already gone is skipped, one with an
// expiry keeps it). A later Put of such a record replaces it whole and
// drops the expiry, as a PutItem does.
func (m *MemStore) ExpireTexts(_ context.Context, eventID string, at time.Time) error {
	if !core.ValidToken(eventID) {
		return core.Fail(release.CodeEventIDInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for sk, s := range m.items[eventID] {
		if (strings.HasPrefix(sk, release.SKSourcePrefix) || strings.HasPrefix(sk, release.SKResultPrefix)) && s.expiresAt == 0 {
			s.expiresAt = at.Unix()
			m.items[eventID][sk] = s
		}
	}
	return nil
}

// Expired is one record DeleteExpired removed.
type Expired struct {
	EventID, SortKey string
	ExpiresAt        int64 // epoch seconds
}

// DeleteExpired is DynamoDB's TTL deletion: every record whose expiry
// (epoch seconds) plus lag(eventID, sortKey) is not after now is deleted.
// DynamoDB deletes an expired item at some time after its expiry (within
// about 48 h), never before; lag chooses that time per item. It returns
// the deleted records, ordered by key.
func (m *MemStore) DeleteExpired(now time.Time, lag func(eventID, sortKey string) time.Duration) []Expired {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Expired
	for eventID, coll := range m.items {
		for sk, s := range coll {
			if s.expiresAt == 0 {
				continue
			}
			if time.Unix(s.expiresAt, 0).Add(lag(eventID, sk)).After(now) {
				continue
			}
			delete(coll, sk)
			out = append(out, Expired{EventID: eventID, SortKey: sk, ExpiresAt: s.expiresAt})
		}
		if len(coll) == 0 {
			delete(m.items, eventID)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].EventID != out[j].EventID {
			return out[i].EventID < out[j].EventID
		}
		return out[i].SortKey < out[j].SortKey
	})
	return out
}

// TextExpiry reports, for each source and result record of the event, its
// expiry (epoch seconds, 0: none).
func (m *MemStore) TextExpiry(eventID string) map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int64{}
	for sk, s := range m.items[eventID] {
		if strings.HasPrefix(sk, release.SKSourcePrefix) || strings.HasPrefix(sk, release.SKResultPrefix) {
			out[sk] = s.expiresAt
		}
	}
	return out
}
