package release

import "context"

// DueItem is a record the sparse wake index says can make progress: an
// evidence request (run the event's release step) or a delivery (deliver).
type DueItem struct {
	EventID  string
	Delivery bool
	WakeMS   int64
}

// DueFinder lists due records without scanning (the wake index). Both
// stores implement it; the scheduled sweep uses it as the safety net for
// lost step messages.
type DueFinder interface {
	// Due returns records whose wake time lies in [fromMS, toMS], earliest
	// first, at most limit.
	Due(ctx context.Context, fromMS, toMS int64, limit int) ([]DueItem, error)
}

// OwedItem is an approval whose localeflow.release.approved event is owed.
type OwedItem struct {
	EventID  string
	JobID    string
	OutboxMS int64
}

// OwedPage is one page of owed events; Next is the cursor of the next
// page, empty after the last one.
type OwedPage struct {
	Items []OwedItem
	Next  string
}

// OutboxFinder lists owed output events without scanning (the sparse
// outbox index). Both stores implement it.
type OutboxFinder interface {
	// Owed returns up to limit records owed since at most toMS, starting
	// after cursor ("" for the first page). Pages cover every record that
	// was owed through the whole paging exactly once or more.
	Owed(ctx context.Context, toMS int64, cursor string, limit int) (OwedPage, error)
}
