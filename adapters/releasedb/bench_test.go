package releasedb

import (
	"context"
	"fmt"
	"testing"

	"github.com/localeflow/localeflow/core/release/releasetest"
)

// BenchmarkLoadCollection reads one event's whole item collection (the
// read every release step does) with one Query.
func BenchmarkLoadCollection(b *testing.B) {
	db, table := newTable(b)
	s := New(db, table)
	ctx := context.Background()
	for _, r := range releasetest.SampleRecords("evt-bench") {
		if err := s.Put(ctx, r, 0); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		snap, err := s.Load(ctx, "evt-bench")
		if err != nil || snap.Plan == nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConditionalPut is one versioned state change (a lease claim or
// finish) as a conditional PutItem.
func BenchmarkConditionalPut(b *testing.B) {
	db, table := newTable(b)
	s := New(db, table)
	ctx := context.Background()
	rec := releasetest.SampleEvidence("evt-put", "req-1")
	if err := s.Put(ctx, rec, 0); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		next := *rec
		next.Version = rec.Version + 1
		next.UpdatedMS++
		if err := s.Put(ctx, &next, rec.Version); err != nil {
			b.Fatal(fmt.Errorf("version %d: %w", rec.Version, err))
		}
		rec = &next
	}
}
