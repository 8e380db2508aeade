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
