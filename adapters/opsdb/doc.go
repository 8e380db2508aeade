// Package opsdb holds the operations side of localeflow's tables: the reads
// the health check makes without scanning, and the operator's few writes
// (requeue, acknowledge) and its on-demand audit.
//
//   - ReleaseReader.ReleaseCensus: every key of the release table's sparse
//     KEYS_ONLY "wake" and "attention" indexes (8 shards each, queried in
//     parallel), then those items (evidence, delivery, a waking job or
//     approval, a blocked release) by strongly
//     consistent BatchGetItem, each decoded by releasedb.Decode and checked
//     (its index keys must agree with its state, as releasedb.Item writes
//     them). It is here, not in adapters/releasedb, because that store
//     exposes no index census; the layout is releasedb's (pk "event#<id>",
//     sk "evidence#<request>" | "delivery").
//   - The monitor census is adapters/monitordb.Store.Census (the same
//     reads on the monitor table); TableItems gives the monitor table's
//     approximate item count (DescribeTable) for counts.terminal.
//   - Requeuer.Requeue puts a failed monitor record back to due with a
//     fresh failure budget, in one TransactWriteItems: the record's
//     conditional UpdateItem (state = failed and unchanged since it was
//     read) and an update of its requeue journal item.
//   - Auditor.Audit is the only Scan: an on-demand, parallel full
//     integrity check of both tables that names every invalid record.
//
// # The requeue journal
//
// adapters/monitordb treats any attribute it does not know as tampering
// (the item decodes Corrupt and fails validation), so a requeue cannot add
// requeued_count to the monitor item. The record itself shows the requeue
// (state retry_wait, consecutive_failures 0, last_error_code
// "operator.requeued", due at once); the count and time are kept in a
// journal item in the same table keyed "requeue#<event_id>". "#" never
// occurs in an event id (a token), so a journal key cannot collide with a
// record, the monitor never reads it (Get refuses non-token ids, and the
// journal carries no index keys), and the audit checks it with its own
// rules. Journal items are counted in DescribeTable's ItemCount, one more
// reason counts.terminal is approximate.
package opsdb
