package sim

// Checks pending a named fix: a finding of such a check is counted and
// reported per block (TestSimSeeds prints the counts, docs/simulation.md
// "Checks pending a fix" lists them) but does not fail the seed; with
// -sim.strict it does. Each entry names the check and the branch or issue
// whose fix removes the entry. Never a silent relaxation: the counts are
// printed on every run.
const (
	// fixOneOutcome: a change whose consumer received a
	// localeflow.change.terminal that is not its stored outcome (another
	// state, remote status, error code, or another outcome_id for the same
	// outcome): published before a finishing write that never landed
	// (issue 24, branch monitor-outcome).
	fixOneOutcome = "issue24-one-outcome"
)

var pendingFixes = map[string]string{
	fixOneOutcome: "issue 24 (branch monitor-outcome): one outcome per change",
}
