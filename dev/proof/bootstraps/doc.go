// Package bootstraps holds checks on what the Lambda bootstraps link. Each
// bootstrap must stay at or below 10 MB stripped for linux/arm64 (`make
// sizes` builds them and fails above the limit); the test here keeps out the
// packages that once pushed them over it.
package bootstraps
