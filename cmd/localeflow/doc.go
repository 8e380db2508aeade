// Command localeflow is the operator CLI. It works on the same DynamoDB
// tables as the functions (credentials and endpoints from the standard AWS
// environment, AWS_ENDPOINT_URL_DYNAMODB included).
//
//	localeflow [flags] status EVENT_ID    one change: monitor record, evidence, delivery, requeues
//	localeflow [flags] health             the health document (same rules as the health function)
//	localeflow [flags] list [--state S] [--kind monitor|evidence|delivery] [--attention]
//	                                      open records and records needing attention
//	                                      (--attention: only the unacknowledged ones blocking health)
//	localeflow [flags] requeue EVENT_ID   a failed change back to due with a fresh failure budget
//	localeflow [flags] ack EVENT_ID --reason TEXT
//	                                      acknowledge a change needing attention as the caller's
//	                                      AWS identity (STS); health stops counting it
//	localeflow [flags] ack EVENT_ID --release [--key KEY] --reason TEXT
//	                                      the same for the release's failed evidence, delivery or
//	                                      job records and its blocked record (all, or KEY's)
//	localeflow [flags] ack EVENT_ID --invalid --reason TEXT
//	                                      a monitor record that fails its integrity check
//	                                      (state_invalid), audited in the ack journal
//	localeflow [flags] audit [--segments N]
//	                                      full integrity check of both tables (parallel Scan;
//	                                      on demand only: it reads every item)
//	localeflow [flags] health --serve [--listen ADDR] [--url URL] | --html FILE [--url URL]
//	                                      the health page for a browser: fetched from the Function URL
//	                                      signed (SigV4) with the caller's credentials, served on
//	                                      127.0.0.1:8765 or written to FILE
//	localeflow [flags] keys               what to hand to the CMS, the producer and the evidence
//	                                      provider (HMAC keys by secret reference, Ed25519 public keys
//	                                      from the public-key secrets the coordinator writes; no seed read)
//	localeflow [flags] quarantine list|replay, dlq list|redrive QUEUE
//	                                      rejected and dead-lettered messages: every message of the
//	                                      queue (bounded scan, cli.queue.scan_incomplete)
//	localeflow [flags] replay --from T --to T
//	                                      replay the deployment's archive to the bus it archives
//	localeflow conformance event|cms|evidence …
//	                                      check a producer's events offline, or a team's running CMS
//	                                      or evidence provider from outside (docs/integrating.md);
//	                                      cms --deliver POSTs deliveries (use a test change)
//
// Flags (before or after the command):
//
//	--monitor-table NAME   default $LOCALEFLOW_MONITOR_TABLE
//	--release-table NAME   default $LOCALEFLOW_RELEASE_TABLE
//	--prefix P             deployment P (topology.New); without it the deployment the
//	                       variables name, refused when they name two (deployment.go)
//	--json                 JSON for scripts instead of tables for people
//	--region R, --profile NAME   the AWS configuration (default: the SDK's)
//
// Exit codes:
//
//	0  ok
//	1  the answer is bad: health blocked, invalid records found, a record
//	   invalid or missing, or the change refused (requeue of a record that
//	   is not failed, or that changed meanwhile)
//	2  usage: unknown command or flag, missing argument or table, an event
//	   id that is not a token
//	3  runtime error: AWS unreachable, throttled, access denied
//	   (cli.credentials_missing: no AWS credentials at all, nothing called)
//	4  conformance cms|evidence only: every MUST check passed, a SHOULD
//	   check failed (3 there: the server could not be reached)
//
// Errors go to stderr as "localeflow: <detail>" naming the code once (a
// stable localeflow error code); with --json, {"code":..., "error":...},
// unless the command's own JSON document lists its errors (one document
// per command).
//
// list shows what the sparse indexes hold: successful terminal records and
// succeeded evidence and deliveries are finished and never listed (audit
// reads them).
package main
