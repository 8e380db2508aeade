// Package harness wires localeflow's real functions to the local stack for
// the proof suites (fault injection, soak, cost): a fresh topology per test
// (dev/localtest), SDK clients carrying a request meter
// (dev/proof/meter) and a fault injector (dev/proof/faultinject), the signed test
// servers (CMS lifecycle, evidence, CMS delivery) behind an HTTP fault
// proxy, the poller and coordinator handlers, and an event source mapping
// player (ESM, on package dev/esm like the runner's) that feeds queue
// batches to a handler the way Lambda does, optionally duplicating,
// reordering and holding back messages.
//
// It reuses the packages the functions are built from (functions/*/handler,
// core/monitor, core/release, adapters/*); nothing here re-implements a
// rule. Every proof test ends with dev/proof/invariant on the tables.
package harness
