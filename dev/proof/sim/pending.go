package sim

// Checks pending a named fix: a finding of such a check is counted and
// reported per block (TestSimSeeds prints the counts, docs/simulation.md
// "Checks pending a fix" lists them) but does not fail the seed; with
// -sim.strict it does. Each entry names the check and the branch or issue
// whose fix removes the entry. Never a silent relaxation: the counts are
// printed on every run, and World.pendingFix refuses a name that is not
// listed here.
//
// Empty since the merge of branch monitor-outcome (issue 24): the
// one-outcome check ("issue24-one-outcome") was pending until then.
var pendingFixes = map[string]string{}
