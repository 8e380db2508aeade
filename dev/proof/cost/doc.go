// Package cost is localeflow's cost model: AWS list prices (Prices, with
// their sources and dates) applied to request counts measured by
// dev/proof/meter in the benchmarks of this package, and the same work priced
// as an AWS Step Functions Standard wait/poll loop for comparison.
//
// `make cost` runs BenchmarkMonitorCost (and BenchmarkReleaseCost) on the
// local stack; docs/cost-model.md explains the figures.
package cost
