package localeflow_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// envCalls names the call log of the integration tests
// (adapters/awsclient.EnvCallLog wrote it; `make test` passes it on).
const envCalls = "LOCALEFLOW_AWS_CALLS"

// runbookPath is the runbook whose commands the check must see called.
const runbookPath = "../../docs/runbook.md"

// commandsWithoutAWS are runbook commands that make no AWS call, and why
// (the check fails if one of them is recorded making one).
var commandsWithoutAWS = map[string]string{
	"localeflow runbook": "prints the runbook section of a code, offline",
}

// pendingGaps are refusals known and owned elsewhere: principal, action
// and the resource's end, with why. They are reported, not failed; one
// that is no longer refused fails the check (remove it).
var pendingGaps = []struct{ principal, action, resourceSuffix, why string }{}

// functionPrincipals are the functions whose calls are checked against
// their own role in every variant.
var functionPrincipals = []string{"poller", "coordinator", "health"}

// runbookCommands are the `localeflow` commands docs/runbook.md tells an
// operator to run: "localeflow <command>", with the subcommand for dlq
// and quarantine.
func runbookCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(runbookPath)
	if err != nil {
		t.Fatal(err)
	}
	// In inline code (which may wrap) or at the start of a line of a code
	// block.
	re := regexp.MustCompile("(?m)(?:`|^)localeflow\\s+(?:--prefix\\s+P\\s+)?([a-z]+)(?:\\s+([a-z]+))?")
	set := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		name := "localeflow " + m[1]
		if (m[1] == "dlq" || m[1] == "quarantine") && m[2] != "" {
			name += " " + m[2]
		}
		set[name] = true
	}
	// "dlq" alone is "dlq list" or "dlq redrive", named in full elsewhere.
	delete(set, "localeflow dlq")
	delete(set, "localeflow quarantine")
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// principalStatements are the statements of principal in v: a function's
// role, or (for "localeflow …") the role GrantOperator was given to.
func principalStatements(tpl *template, v variant, principal string) ([]statement, error) {
	if strings.HasPrefix(principal, "localeflow ") {
		if v.operatorRole == "" {
			return nil, nil
		}
		return tpl.roleStatements(v.operatorRole)
	}
	for id := range tpl.resources {
		if tpl.typeOf(id) != "AWS::Lambda::Function" {
			continue
		}
		name, err := tpl.name(id)
		if err != nil {
			return nil, err
		}
		if name == v.prefix+"-"+principal {
			role := tpl.props(id)["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
			return tpl.roleStatements(role)
		}
	}
	return nil, fmt.Errorf("no function %s-%s in the template", v.prefix, principal)
}

// checkCalls evaluates calls in every variant; it returns each refusal
// (deduplicated) and the number of distinct requests checked.
func checkCalls(t *testing.T, variants []variant, calls []recordedCall) (refusals []string, checked, foreign int) {
	t.Helper()
	seen := map[string]bool{}
	for _, v := range variants {
		tpl := newTemplate(v.template)
		n, err := newNames(tpl, v.prefix)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		stmts := map[string][]statement{}
		for _, c := range calls {
			if _, ok := stmts[c.Principal]; !ok {
				s, err := principalStatements(tpl, v, c.Principal)
				if err != nil {
					t.Fatalf("%s: %s: %v", v.name, c.Principal, err)
				}
				stmts[c.Principal] = s
			}
			if stmts[c.Principal] == nil {
				continue // no operator role in this variant
			}
			reqs, err := requestsOf(c, n)
			if errors.Is(err, errForeign) {
				foreign++
				continue
			}
			if err != nil {
				t.Fatalf("%s: %s %s.%s: %v", v.name, c.Principal, c.Service, c.Operation, err)
			}
			for _, r := range reqs {
				key := v.name + "|" + c.Principal + "|" + r.String()
				if seen[key] {
					continue
				}
				seen[key] = true
				checked++
				ok, _, err := allowed(stmts[c.Principal], r)
				if err != nil {
					t.Fatalf("%s: %v", v.name, err)
				}
				if !ok {
					refusals = append(refusals, fmt.Sprintf("%s: %s (%s.%s) needs %s", v.name, c.Principal, c.Service, c.Operation, r))
				}
			}
		}
	}
	sort.Strings(refusals)
	return refusals, checked, foreign
}

// TestEveryRecordedCallIsAllowed is the IAM sufficiency check: every AWS
// call the integration tests recorded (make test: each function and each
// CLI command, through adapters/awsclient.Record) must be allowed by the
// policies the stack gives its principal: a function's role in every
// synthesized variant, GrantOperator's role in the team-embed stack, with
// resource ARNs and conditions. The recording must hold calls of the three
// functions and of every command docs/runbook.md names.
func TestEveryRecordedCallIsAllowed(t *testing.T) {
	name := os.Getenv(envCalls)
	if name == "" {
		if os.Getenv(envRequireIndependent) == "1" {
			t.Fatalf("%s is not set: make test records the integration tests' AWS calls into build/aws-calls.jsonl", envCalls)
		}
		t.Skipf("%s is not set (make test records the integration tests' AWS calls and runs this check)", envCalls)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := decodeCalls(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	principals := map[string]int{}
	for _, c := range calls {
		principals[c.Principal]++
	}
	for _, p := range functionPrincipals {
		if principals[p] == 0 {
			t.Errorf("no call of the %s function was recorded", p)
		}
	}
	commands := runbookCommands(t)
	for _, cmd := range commands {
		_, offline := commandsWithoutAWS[cmd]
		switch {
		case offline && principals[cmd] > 0:
			t.Errorf("%s made %d AWS calls; it is listed as making none", cmd, principals[cmd])
		case !offline && principals[cmd] == 0:
			t.Errorf("no AWS call of the runbook command `%s` was recorded: an integration test must run it", cmd)
		}
	}
	for p := range principals {
		if !slices.Contains(functionPrincipals, p) && !strings.HasPrefix(p, "localeflow ") {
			t.Errorf("calls of unknown principal %q", p)
		}
	}
	variants := synthVariants(t)
	refusals, checked, foreign := checkCalls(t, variants, calls)
	pending := map[int]int{}
	failed := 0
	for _, r := range refusals {
		i := slices.IndexFunc(pendingGaps, func(g struct{ principal, action, resourceSuffix, why string }) bool {
			return strings.Contains(r, " "+g.principal+" (") && strings.Contains(r, " needs "+g.action+" on ") && strings.HasSuffix(r, g.resourceSuffix)
		})
		if i >= 0 {
			pending[i]++
			t.Logf("pending (%s): %s", pendingGaps[i].why, r)
			continue
		}
		failed++
		t.Error("refused: " + r)
	}
	for i, g := range pendingGaps {
		if pending[i] == 0 {
			t.Errorf("pending gap %s %s …%s is no longer refused: remove it from pendingGaps", g.principal, g.action, g.resourceSuffix)
		}
	}
	summary(t, fmt.Sprintf("IAM sufficiency: %d recorded AWS calls of %d principals (3 functions, %d runbook commands) → %d distinct authorizations checked against the synthesized policies of %d variants: %d refused, %d pending (pendingGaps); %d calls (all variants) on a test's own resources not checked",
		len(calls), len(principals), len(commands), checked, len(variants), failed, len(refusals)-failed, foreign))
}

// replayAndKeysCalls are what `localeflow replay` and `localeflow keys`
// call (as the integration tests record them), on a deployment of any
// prefix.
var replayAndKeysCalls = []recordedCall{
	{Principal: "localeflow replay", Service: "EventBridge", Operation: "DescribeArchive", Params: map[string]any{"ArchiveName": "p-archive"}},
	{Principal: "localeflow replay", Service: "EventBridge", Operation: "DescribeRule", Params: map[string]any{"Name": "p-change-dispatched", "EventBusName": "p-bus"}},
	{Principal: "localeflow replay", Service: "EventBridge", Operation: "DescribeRule", Params: map[string]any{"Name": "p-release-input", "EventBusName": "p-bus"}},
	{Principal: "localeflow replay", Service: "EventBridge", Operation: "StartReplay", Params: map[string]any{
		"EventSourceArn": "arn:aws:events:us-east-1:000000000000:archive/p-archive", "ReplayName": "p-replay-1"}},
	{Principal: "localeflow keys", Service: "Secrets Manager", Operation: "DescribeSecret", Params: map[string]any{"SecretId": "p/cms-hmac-key"}},
	{Principal: "localeflow keys", Service: "Secrets Manager", Operation: "GetSecretValue", Params: map[string]any{"SecretId": "p/approval-ed25519-public-key"}},
	{Principal: "localeflow keys", Service: "Secrets Manager", Operation: "GetSecretValue", Params: map[string]any{"SecretId": "p/publication-ed25519-public-key"}},
}

// TestGrantOperatorCoversReplayAndKeys (issue 37, finding 5): `localeflow
// replay` calls DescribeArchive and DescribeRule, which GrantOperator
// lacked (only StartReplay on the archive), and `keys` DescribeSecret and
// GetSecretValue on the public-key secrets (never a seed's); on
// the team's host bus the rules are rule/team-bus/<name>. With the
// operator's policy stripped of one of those actions the same calls are
// refused: the evaluator is what fails the check.
func TestGrantOperatorCoversReplayAndKeys(t *testing.T) {
	var team variant
	for _, v := range synthVariants(t) {
		if v.operatorRole != "" {
			team = v
		}
	}
	refusals, checked, _ := checkCalls(t, []variant{team}, replayAndKeysCalls)
	if len(refusals) != 0 || checked != len(replayAndKeysCalls) {
		t.Fatalf("%d of %d checked, refused:\n%s", checked, len(replayAndKeysCalls), strings.Join(refusals, "\n"))
	}
	for _, removed := range []string{"events:DescribeRule", "events:DescribeArchive", "events:StartReplay", "secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"} {
		stripped := variant{name: team.name + "-without-" + removed, prefix: team.prefix, operatorRole: team.operatorRole,
			template: withoutAction(t, team.template, removed)}
		refusals, _, _ := checkCalls(t, []variant{stripped}, replayAndKeysCalls)
		if len(refusals) == 0 || !strings.Contains(strings.Join(refusals, "\n"), "needs "+removed+" on ") {
			t.Errorf("without %s: refused %v", removed, refusals)
		}
	}
}

// withoutAction is a deep copy of tpl with action removed from every
// policy statement.
func withoutAction(t *testing.T, tpl map[string]any, action string) map[string]any {
	t.Helper()
	b, err := json.Marshal(tpl)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	for _, r := range out["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] != "AWS::IAM::Policy" {
			continue
		}
		for _, s := range asList(res["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"]) {
			st := s.(map[string]any)
			var keep []any
			for _, a := range asList(st["Action"]) {
				if a != action {
					keep = append(keep, a)
				}
			}
			if len(keep) == 0 {
				keep = []any{"none:Nothing"}
			}
			st["Action"] = keep
		}
	}
	return out
}
