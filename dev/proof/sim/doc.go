// Package sim is the deterministic simulation of the whole pipeline: the
// real poller and coordinator handlers and services on the memory stores,
// with AWS (SQS with its event source mapping, EventBridge, schedules), the
// HTTP peers and time simulated inside a testing/synctest bubble, every
// call boundary scheduled by one seeded PRNG that also decides every fault.
// Checkers read the whole history after each seed. docs/simulation.md says
// what is simulated and how to replay a seed.
package sim
