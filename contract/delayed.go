package contract

// DelayedSchema is the schema of every delayed message.
const DelayedSchema = "localeflow.delayed.v1"

// Delayed-message kinds: which function acts on the message and how.
const (
	// KindPoll is the poller's next poll (or retry) of one change.
	KindPoll = "poll"
	// KindReleaseRun and KindReleaseDeliver are the coordinator's next
	// release step of one event: evidence and approvals, or the delivery.
	KindReleaseRun     = "release.run"
	KindReleaseDeliver = "release.deliver"
)

// DelayedMessage is the SQS body of a delayed message: a function's own
// next step, sent with DelaySeconds (at most 900 s; a longer wait is
// chained: the consumer sends the same body again until NotBeforeMS).
// Exactly these keys ("ref" only when set), nothing else; real bodies are
// about 150 bytes, at most 4096.
type DelayedMessage struct {
	// Schema is DelayedSchema.
	Schema string `json:"schema"`
	// Kind is one of the Kind constants.
	Kind string `json:"kind"`
	// EventID is the change or release event the step is for (a token).
	EventID string `json:"event_id"`
	// Ref is an optional token; no kind in use sets it.
	Ref string `json:"ref,omitempty"`
	// NotBeforeMS is the earliest time the consumer acts, in Unix ms.
	NotBeforeMS int64 `json:"not_before_ms"`
}
