package release

import "context"

// DueItem is a record the sparse wake index says can make progress: an
// evidence request, a never-claimed job or the approval that completed the
// plan (run the event's release step), or a delivery (deliver).
type DueItem struct {
	EventID  string
	Delivery bool
	WakeMS   int64
}

// DuePage is one page of due records; Next is the cursor of the next
// page, empty after the last one.
type DuePage struct {
	Items []DueItem
	Next  string
}

// DueFinder lists due records without scanning (the wake index). Both
// stores implement it; the scheduled sweep uses it as the safety net for
// lost step messages.
type DueFinder interface {
	// Due returns up to limit records whose wake time is at most toMS,
	// starting after cursor ("" for the first page). The sweep pages
	// through all of them: no record is starved by others that wake
	// earlier, however many there are. Cursors are the store's own; a
	// foreign one is refused.
	Due(ctx context.Context, toMS int64, cursor string, limit int) (DuePage, error)
}
