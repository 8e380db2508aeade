// Package lifecycle is the CMS lifecycle contract (docs/design.md "CMS lifecycle
// API"): the remote status sets, the poll target a response must match, and
// the strict validation of a lifecycle response body. The HTTP client
// (adapters/cms) validates every response with Parse before handing it to
// the monitor, and the monitor validates stored snapshots with the same
// rules, so one definition decides what a valid lifecycle view is.
package lifecycle
