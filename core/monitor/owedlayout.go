package monitor

import "github.com/localeflow/localeflow/core"

// OwedLayout is a store setting: where a store that indexes owed outcomes
// (adapters/monitordb) leaves the outcome a finishing write makes owed
// (docs/design.md "Owed outcomes in the wake index"). It only chooses what
// a store writes: every store reads, announces, clears and counts records
// of both layouts, so pollers of different layouts can share one table.
// The memory store has no indexes and ignores it.
type OwedLayout string

// Owed outcome layouts (LOCALEFLOW_OWED_LAYOUT, the stack's OwedLayout).
const (
	// OwedInWake keeps an owed final record in the wake index at the wake
	// key its claim left and sets outbox_ms without outbox_shard: the
	// finishing write changes no index key. The default.
	OwedInWake OwedLayout = "wake"
	// OwedInOutbox is the earlier layout: the finishing write removes the
	// wake keys and sets outbox_shard and outbox_ms (the outbox index).
	// Code from before "Owed outcomes in the wake index" reads only this
	// layout, so a deployment running it deploys once with this layout
	// before it switches (docs/design.md, deploy order).
	OwedInOutbox OwedLayout = "outbox"
)

// ParseOwedLayout returns the layout named s: "" (the default) and "wake"
// are OwedInWake, "outbox" is OwedInOutbox; anything else (other spellings
// included) fails with CodeOwedLayoutInvalid.
func ParseOwedLayout(s string) (OwedLayout, error) {
	switch OwedLayout(s) {
	case "", OwedInWake:
		return OwedInWake, nil
	case OwedInOutbox:
		return OwedInOutbox, nil
	}
	return "", core.Fail(CodeOwedLayoutInvalid)
}
