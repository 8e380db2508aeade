package releasedb

import (
	"context"

	"github.com/localeflow/localeflow/core/release"
)

var _ release.DueFinder = (*Store)(nil)

// Due implements release.DueFinder: KEYS_ONLY Queries of the sparse wake
// index (wake_shard = s AND wake_ms <= to), shard after shard, each
// resuming at the cursor's ExclusiveStartKey. The index is eventually
// consistent; a stale candidate only costs a step that finds nothing to
// do.
func (s *Store) Due(ctx context.Context, toMS int64, cursor string, limit int) (release.DuePage, error) {
	keys, next, err := s.page(ctx, wakeIndex, toMS, cursor, limit)
	if err != nil {
		return release.DuePage{}, err
	}
	out := release.DuePage{Next: next}
	for _, k := range keys {
		eventID, err := eventOf(k.PK)
		if err != nil {
			return release.DuePage{}, err
		}
		out.Items = append(out.Items, release.DueItem{EventID: eventID, Delivery: k.SK == release.SKDelivery, WakeMS: k.MS})
	}
	return out, nil
}
