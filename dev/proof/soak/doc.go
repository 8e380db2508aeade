// Package soak runs localeflow under sustained load on the local stack:
// 8 poller instances and 2 coordinator instances, each with its own
// event source mapping player, over LOCALEFLOW_SOAK_CHANGES monitored
// changes (default 10,000) and LOCALEFLOW_SOAK_RELEASES releases (default
// 1,000), bounded by LOCALEFLOW_SOAK_BUDGET (default 8m). It reports
// throughput, retries and p50/p99 poll latency and ends with the invariant
// checker over both tables. `make soak` runs it; it is not part of
// `make test` (it needs LOCALEFLOW_SOAK=1).
package soak
