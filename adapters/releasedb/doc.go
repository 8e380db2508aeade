// Package releasedb is the DynamoDB implementation of release.Store.
//
// One item collection per event in the release table (topology.Release):
// pk = "event#" + event id, sk = "plan" | "job#<job>" | "source#<job>" |
// "result#<job>" | "evidence#<request>" | "approval#<job>" | "delivery".
// Load reads the whole collection with one strongly consistent Query (more
// pages only past 1 MB); LoadState reads every record but the texts (sort
// keys below "result#": source# and result# sort last), LoadPrefix one
// kind of record (begins_with) and LoadKeys named records with one
// consistent single-key Query each (docs/design.md "Release reads"). Put is a PutItem conditional on the version the
// caller read (attribute_not_exists(pk) for a new record, else v = :prev),
// so every state change is a conditional write and a duplicate or stale
// writer changes nothing; ConditionalCheckFailedException becomes
// release.ErrConflict inside this package. PutAll writes several records of
// one event (a job record and its result) with one TransactWriteItems of
// such conditional Puts: all or nothing.
//
// Evidence and delivery items that can wake (pending/retry_wait at
// next_attempt_ms, leased at lease_expires_ms) carry wake_shard and wake_ms
// and so appear in the sparse KEYS_ONLY "wake" index; failed ones carry
// attention_shard and attention_ms for the "attention" index. Each PutItem
// writes the whole item, so a record that stops waking loses the index keys
// in the same write. Only source# and result# items hold texts.
//
// Attributes (besides pk, sk, v and the index keys) are the dynamodbav
// names of the core/release record types; evidence and delivery items carry
// the lease fields status (pending|leased|retry_wait|succeeded|failed),
// attempts, max_attempts, next_attempt_ms, lease_owner, lease_token,
// lease_expires_ms, last_error_code, created_ms, updated_ms. Decode turns
// any item back into its record.
package releasedb
