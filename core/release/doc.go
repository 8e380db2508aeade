// Package release is the release coordinator's domain on DynamoDB/SQS
// (docs/design.md "Shape", "Release coordinator"):
//
//   - signed input events (`localeflow.plan.accepted`,
//     `localeflow.job.completed`): HMAC over the exact payload bytes, then a
//     strict payload validation; nothing is stored for a forged event;
//   - the records of one event's item collection (plan, job statuses,
//     source texts, results, evidence state, approvals, delivery) and the
//     Store port that keeps them with conditional (compare-and-swap) writes;
//   - evidence state: leased, bounded attempts per evidence request (a
//     binding check, a fixed attempt policy, lease expiry, backoff
//     min(3600, 5·2^(attempts-1)) s, mark_approved);
//   - the evidence request (request id from the hash of its binding) and the
//     strict validation of the provider's response (review policy, reviewer
//     independence, NFC receipts, request immutability);
//   - receipt verification (Ed25519 by issuer key, kind, binding, expiry);
//   - the approval and publication authorities (localeflow's Ed25519 keys);
//   - RunNextRelease (approve at most one locale per step, prepare the
//     delivery once every locale is approved), RunInput (a job input of a
//     tallied release approves its own locale, reading that locale's
//     records; the tally of approved jobs says when to read the whole
//     release and prepare the delivery) and Deliver (send the signed
//     bundle with leased, bounded attempts);
//   - Coordinator.Step, the one step driver of the coordinator function and
//     every test: run a step, publish its events through a Publisher in
//     order (owed approvals, its approval, its delivery event), settle each
//     approval after its publish, run the completing read, expire the
//     texts of a delivered or blocked release, publish a blocked release's
//     owed approvals, and return the message to schedule (StepResult.Next).
//
// Content-free: evidence, job, approval, delivery and plan records hold only
// identities, counts, codes and hashes. Texts live only in the source and
// result records, which delivery needs. Error codes are stable strings
// (docs/design.md "Release error codes").
//
// The package imports no AWS SDK: adapters/releasedb implements Store on
// DynamoDB and releasetest holds an in-memory Store and the conformance
// suite both run.
package release
