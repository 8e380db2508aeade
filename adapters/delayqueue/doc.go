// Package delayqueue sends and reads delayed SQS messages: the next poll of
// a watched change, a retry after backoff, a release step due later.
//
// A message body is an envelope (strict JSON, exactly these keys; "ref" is
// optional):
//
//	{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","not_before_ms":1764460830000}
//	{"schema":"localeflow.delayed.v1","kind":"release","event_id":"evt-1","ref":"job-7","not_before_ms":…}
//
// kind is a lowercase code naming what the consumer must do
// (^[a-z][a-z0-9_.-]{0,63}$), event_id the change, ref an optional second
// token (for example a job id), not_before_ms the earliest time (integer
// ms) the consumer may act.
//
// SQS caps DelaySeconds at 900. Send sets DelaySeconds = min(900,
// ceil(not_before − now)), 0 when due; a consumer that receives a message
// early (Due reports not due) re-sends the same envelope with the remaining
// delay (Resend) instead of acting, which chains waits longer than 15
// minutes.
package delayqueue
