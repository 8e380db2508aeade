package localeflow

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/topology"
)

// TestNoWildcardActions walks every policy statement in the template (role
// policies, trust policies, queue policies, anything with a Statement) and
// fails on any action containing "*" and on NotAction (an inverted list is
// a wildcard in disguise).
func TestNoWildcardActions(t *testing.T) {
	for name, props := range map[string]*Props{
		"default": testProps(),
		"alarm topic": func() *Props {
			p := testProps()
			p.AlarmTopicArn = "arn:aws:sns:us-east-1:1:t"
			return p
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			s := synth(t, props)
			n := 0
			statements(s.raw["Resources"], func(path string, st map[string]any) {
				n++
				if _, ok := st["NotAction"]; ok {
					t.Errorf("%s uses NotAction", path)
				}
				actions := asList(st["Action"])
				if len(actions) == 0 {
					t.Errorf("%s has no Action", path)
				}
				for _, a := range actions {
					s, ok := a.(string)
					if !ok || strings.Contains(s, "*") {
						t.Errorf("%s: wildcard or non-literal action %v", path, a)
					}
				}
			})
			// Guard against a walk that finds nothing: 3 roles' trust and
			// inline policies, 4 queue policies.
			if n < 20 {
				t.Fatalf("walked only %d statements", n)
			}
		})
	}
}

func TestRolesHaveNoManagedPolicies(t *testing.T) {
	s := defaultSynth(t)
	roles := s.resources("AWS::IAM::Role")
	if len(roles) != 3 {
		t.Fatalf("%d roles, want one per function", len(roles))
	}
	for id, r := range roles {
		p := r["Properties"].(map[string]any)
		if p["ManagedPolicyArns"] != nil || p["Policies"] != nil {
			t.Errorf("role %s: managed %v inline %v", id, p["ManagedPolicyArns"], p["Policies"])
		}
		trust, _ := json.Marshal(p["AssumeRolePolicyDocument"])
		if !strings.Contains(string(trust), `"Service":"lambda.amazonaws.com"`) {
			t.Errorf("role %s trusts %s", id, trust)
		}
	}
}

// TestLeastPrivilegePerFunction pins, for every function, the exact set of
// (action, resource) pairs its role may use. A grant helper that adds an
// action, or a resource the function does not use, fails this test.
func TestLeastPrivilegePerFunction(t *testing.T) {
	s := defaultSynth(t)
	names := s.resourceNames(t)
	consume := []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}
	pairs := func(resource string, actions ...string) []string {
		var out []string
		for _, a := range actions {
			out = append(out, a+" on "+resource)
		}
		return out
	}
	// Active tracing: the X-Ray daemon's writes, which take no resource.
	xray := pairs("*", "xray:PutTelemetryRecords", "xray:PutTraceSegments")
	want := map[string][]string{
		"poller": slices.Concat(xray,
			pairs("log-group PollerFunction", "logs:CreateLogStream", "logs:PutLogEvents"),
			pairs("table MonitorTable", "dynamodb:BatchGetItem", "dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"),
			pairs("table MonitorTable/index/wake", "dynamodb:Query"),
			pairs("queue PollQueue", append([]string{"sqs:SendMessage"}, consume...)...),
			pairs("queue QuarantineQueue", "sqs:SendMessage"),
			pairs("bus", "events:PutEvents"),
			pairs("secret CMSKeySecret", "secretsmanager:GetSecretValue"),
			pairs("secret EventKeySecret", "secretsmanager:GetSecretValue"),
			pairs("key DataKey", "kms:Decrypt", "kms:GenerateDataKey", "kms:Decrypt"),
		),
		"coordinator": slices.Concat(xray,
			pairs("log-group CoordinatorFunction", "logs:CreateLogStream", "logs:PutLogEvents"),
			pairs("table ReleaseTable", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"),
			pairs("table ReleaseTable/index/wake", "dynamodb:Query"),
			pairs("queue ReleaseQueue", append([]string{"sqs:SendMessage"}, consume...)...),
			pairs("queue QuarantineQueue", "sqs:SendMessage"),
			pairs("bus", "events:PutEvents"),
			pairs("secret CMSKeySecret", "secretsmanager:GetSecretValue"),
			pairs("secret EventKeySecret", "secretsmanager:GetSecretValue"),
			pairs("secret EvidenceKeySecret", "secretsmanager:GetSecretValue"),
			pairs("secret ApprovalKeySecret", "secretsmanager:GetSecretValue"),
			pairs("secret PublicationKeySecret", "secretsmanager:GetSecretValue"),
			pairs("secret ApprovalPublicKeySecret", "secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue"),
			pairs("secret PublicationPublicKeySecret", "secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue"),
			pairs("key DataKey", "kms:Decrypt", "kms:GenerateDataKey", "kms:Decrypt", "kms:Decrypt", "kms:GenerateDataKey"),
		),
		"health": slices.Concat(xray,
			pairs("log-group HealthFunction", "logs:CreateLogStream", "logs:PutLogEvents"),
			pairs("table MonitorTable", "dynamodb:BatchGetItem", "dynamodb:DescribeTable"),
			pairs("table MonitorTable/index/wake", "dynamodb:Query"),
			pairs("table MonitorTable/index/attention", "dynamodb:Query"),
			pairs("table ReleaseTable", "dynamodb:BatchGetItem"),
			pairs("table ReleaseTable/index/wake", "dynamodb:Query"),
			pairs("table ReleaseTable/index/attention", "dynamodb:Query"),
			pairs("bus", "events:PutEvents"),
			pairs("key DataKey", "kms:Decrypt"),
		),
	}
	for _, fn := range s.topo.Functions {
		t.Run(fn.Dir, func(t *testing.T) {
			roleID := s.logicalID(t, "AWS::IAM::Role", fn.Logical+"Role")
			var got []string
			for id, r := range s.resources("AWS::IAM::Policy") {
				p := r["Properties"].(map[string]any)
				if !jsonEqual(p["Roles"], []any{ref(roleID)}) {
					continue
				}
				statements(p, func(path string, st map[string]any) {
					if st["Effect"] != "Allow" {
						t.Errorf("%s%s: unexpected effect %v", id, path, st["Effect"])
					}
					for _, res := range asList(st["Resource"]) {
						for _, a := range asList(st["Action"]) {
							got = append(got, fmt.Sprintf("%s on %s", a, names.describe(t, res)))
						}
					}
				})
			}
			sort.Strings(got)
			exp := slices.Clone(want[fn.Dir])
			sort.Strings(exp)
			if !slices.Equal(got, exp) {
				t.Errorf("permissions of %s\n got %s\nwant %s", fn.Dir, strings.Join(got, "\n     "), strings.Join(exp, "\n     "))
			}
		})
	}
}

// resourceNames maps logical ids back to the construct ids the test speaks.
type resourceNames map[string]string

func (s synthesized) resourceNames(t testing.TB) resourceNames {
	t.Helper()
	names := resourceNames{}
	add := func(typ, construct, label string) { names[s.logicalID(t, typ, construct)] = label }
	for _, table := range s.topo.Tables() {
		add("AWS::DynamoDB::Table", table.Logical, "table "+table.Logical)
	}
	for _, q := range s.topo.Queues() {
		add("AWS::SQS::Queue", q.Logical, "queue "+q.Logical)
		add("AWS::SQS::Queue", q.Logical+"DLQ", "queue "+q.Logical+"DLQ")
	}
	add("AWS::SQS::Queue", s.topo.Quarantine.Logical, "queue "+s.topo.Quarantine.Logical)
	for _, fn := range s.topo.Functions {
		add("AWS::Logs::LogGroup", fn.Logical+"Logs", "log-group "+fn.Logical)
	}
	for _, spec := range secretSpecs {
		add("AWS::SecretsManager::Secret", spec.Logical, "secret "+spec.Logical)
	}
	for _, ts := range topology.Secrets {
		if ts.PublicLogical != "" {
			add("AWS::SecretsManager::Secret", ts.PublicLogical, "secret "+ts.PublicLogical)
		}
	}
	add("AWS::Events::EventBus", "EventBus", "bus")
	if len(s.resources("AWS::KMS::Key")) > 0 {
		add("AWS::KMS::Key", DataKeyLogical, "key "+DataKeyLogical)
	}
	return names
}

// describe names a statement resource: a Ref/GetAtt of a known resource, or
// a table index ARN built with Fn::Join. Anything else fails the test.
func (n resourceNames) describe(t testing.TB, res any) string {
	t.Helper()
	m, ok := res.(map[string]any)
	if res == "*" {
		// Only X-Ray's write actions take no resource (active tracing);
		// TestLeastPrivilegePerFunction lists exactly those on "*".
		return "*"
	}
	if !ok {
		t.Fatalf("literal resource %v (want references to this stack's resources)", res)
	}
	if id, ok := m["Ref"].(string); ok && n[id] != "" {
		return n[id]
	}
	if att, ok := m["Fn::GetAtt"].([]any); ok && len(att) == 2 && att[1] == "Arn" && n[fmt.Sprint(att[0])] != "" {
		return n[fmt.Sprint(att[0])]
	}
	if join, ok := m["Fn::Join"].([]any); ok && len(join) == 2 && join[0] == "" {
		parts := join[1].([]any)
		if len(parts) == 2 {
			suffix, _ := parts[1].(string)
			base := n.describe(t, parts[0])
			if strings.HasPrefix(base, "table ") && strings.HasPrefix(suffix, "/index/") &&
				(suffix == "/index/"+topology.IndexWake || suffix == "/index/"+topology.IndexAttention) {
				return base + suffix
			}
		}
	}
	t.Fatalf("unrecognised resource %v", res)
	return ""
}

// TestHealthReadsOnlyContentFreeReleaseAttributes: the health role could
// GetItem and BatchGetItem whole release items (texts included); its only
// release-table read is now BatchGetItem limited by dynamodb:Attributes to
// topology.ReleaseCensusAttributes with Select SPECIFIC_ATTRIBUTES.
func TestHealthReadsOnlyContentFreeReleaseAttributes(t *testing.T) {
	st := healthStatement(t, defaultSynth(t), "ReadReleaseItems")
	checkOnlyAttributes(t, st, []string{"dynamodb:BatchGetItem"}, topology.ReleaseCensusAttributes, "StringEqualsIfExists")
	for _, a := range topology.ReleaseCensusAttributes {
		if a == "text" || a == "result_json" || a == "token" {
			t.Errorf("content attribute %q readable", a)
		}
	}
}

// TestHealthReadsOnlyNeededAttributes: the health role read whole monitor
// items (BatchGetItem, the acknowledgement journal's operator ARN and
// reason included) and queried four indexes of both tables for every
// attribute they hold. Every read statement of the role now carries a
// dynamodb:Attributes condition (with Select SPECIFIC_ATTRIBUTES) matching
// the projections the census makes, and the role has no GetItem, Scan or
// base-table Query.
func TestHealthReadsOnlyNeededAttributes(t *testing.T) {
	s := defaultSynth(t)
	checkOnlyAttributes(t, healthStatement(t, s, "ReadMonitorItems"), []string{"dynamodb:BatchGetItem"},
		topology.MonitorCensusAttributes, "StringEqualsIfExists")
	for _, sid := range []string{"QueryMonitorIndexes", "QueryReleaseIndexes"} {
		attrs := topology.MonitorIndexQueryAttributes
		if sid == "QueryReleaseIndexes" {
			attrs = topology.ReleaseIndexQueryAttributes
		}
		checkOnlyAttributes(t, healthStatement(t, s, sid), []string{"dynamodb:Query"}, attrs, "StringEquals")
	}
	for _, a := range topology.MonitorCensusAttributes {
		if a == "operator" || a == "reason" || a == "text" {
			t.Errorf("monitor attribute %q readable by health", a)
		}
	}
	roleID := s.logicalID(t, "AWS::IAM::Role", "HealthFunctionRole")
	for _, r := range s.resources("AWS::IAM::Policy") {
		p := r["Properties"].(map[string]any)
		if !jsonEqual(p["Roles"], []any{ref(roleID)}) {
			continue
		}
		statements(p, func(path string, st map[string]any) {
			for _, a := range asList(st["Action"]) {
				switch a {
				case "dynamodb:GetItem", "dynamodb:Scan":
					t.Errorf("%s: health may %s", path, a)
				case "dynamodb:BatchGetItem", "dynamodb:Query":
					if _, ok := st["Condition"].(map[string]any)["ForAllValues:StringEquals"]; !ok {
						t.Errorf("%s: %s without a dynamodb:Attributes condition", path, a)
					}
				}
			}
		})
	}
}

// healthStatement returns the statement sid of the health role.
func healthStatement(t *testing.T, s synthesized, sid string) map[string]any {
	t.Helper()
	roleID := s.logicalID(t, "AWS::IAM::Role", "HealthFunctionRole")
	var found map[string]any
	for _, r := range s.resources("AWS::IAM::Policy") {
		p := r["Properties"].(map[string]any)
		if !jsonEqual(p["Roles"], []any{ref(roleID)}) {
			continue
		}
		statements(p, func(_ string, st map[string]any) {
			if st["Sid"] == sid {
				found = st
			}
		})
	}
	if found == nil {
		t.Fatalf("no %s statement on the health role", sid)
	}
	return found
}

// checkOnlyAttributes: st allows exactly actions, only on attrs, with
// Select SPECIFIC_ATTRIBUTES under the operator sel.
func checkOnlyAttributes(t *testing.T, st map[string]any, actions, attrs []string, sel string) {
	t.Helper()
	if got := sortedStrings(st["Action"]); !slices.Equal(got, actions) {
		t.Errorf("%s: actions %v, want %v", st["Sid"], got, actions)
	}
	cond, _ := st["Condition"].(map[string]any)
	all, _ := cond["ForAllValues:StringEquals"].(map[string]any)
	if got := sortedStrings(all["dynamodb:Attributes"]); !slices.Equal(got, slices.Sorted(slices.Values(attrs))) {
		t.Errorf("%s: dynamodb:Attributes %v, want %v", st["Sid"], got, attrs)
	}
	if m, _ := cond[sel].(map[string]any); m["dynamodb:Select"] != "SPECIFIC_ATTRIBUTES" {
		t.Errorf("%s: %s dynamodb:Select %v", st["Sid"], sel, cond)
	}
}

// TestPutEventsOnlyForOwnDetailTypes: every role could put any detail-type
// (a dispatch, plan or job event included) on the bus; each function's
// PutEvents now requires the localeflow source and one of the
// detail-types it emits.
func TestPutEventsOnlyForOwnDetailTypes(t *testing.T) {
	s := defaultSynth(t)
	inputs := []string{contract.DetailChangeDispatched, contract.DetailPlanAccepted, contract.DetailJobCompleted}
	for _, fn := range s.topo.Functions {
		t.Run(fn.Dir, func(t *testing.T) {
			roleID := s.logicalID(t, "AWS::IAM::Role", fn.Logical+"Role")
			n := 0
			for _, r := range s.resources("AWS::IAM::Policy") {
				p := r["Properties"].(map[string]any)
				if !jsonEqual(p["Roles"], []any{ref(roleID)}) {
					continue
				}
				statements(p, func(path string, st map[string]any) {
					if !slices.Contains(asList(st["Action"]), any("events:PutEvents")) {
						return
					}
					n++
					cond, _ := st["Condition"].(map[string]any)
					eq, _ := cond["StringEquals"].(map[string]any)
					if eq["events:source"] != contract.EventSource {
						t.Errorf("%s: events:source %v", path, eq["events:source"])
					}
					got := sortedStrings(eq["events:detail-type"])
					if !slices.Equal(got, slices.Sorted(slices.Values(fn.Emits))) {
						t.Errorf("%s: events:detail-type %v, want %v", path, got, fn.Emits)
					}
					for _, in := range inputs {
						if slices.Contains(got, in) {
							t.Errorf("%s may publish the input %s", path, in)
						}
					}
				})
			}
			if n != 1 {
				t.Fatalf("%d PutEvents statements, want 1", n)
			}
		})
	}
}

// TestCoordinatorUpdatesOnlyTheTTL: the coordinator's UpdateItem (text
// retention) may touch only pk, sk and expires_at, its condition reading
// schema_version (an item of another format is left as it is).
func TestCoordinatorUpdatesOnlyTheTTL(t *testing.T) {
	s := defaultSynth(t)
	roleID := s.logicalID(t, "AWS::IAM::Role", "CoordinatorFunctionRole")
	found := 0
	for _, r := range s.resources("AWS::IAM::Policy") {
		p := r["Properties"].(map[string]any)
		if !jsonEqual(p["Roles"], []any{ref(roleID)}) {
			continue
		}
		statements(p, func(path string, st map[string]any) {
			if !slices.Contains(asList(st["Action"]), any("dynamodb:UpdateItem")) {
				return
			}
			found++
			cond, _ := st["Condition"].(map[string]any)
			all, _ := cond["ForAllValues:StringEquals"].(map[string]any)
			if got := sortedStrings(all["dynamodb:Attributes"]); !slices.Equal(got, []string{topology.AttrExpiresAt, topology.AttrPK, "schema_version", topology.AttrSK}) {
				t.Errorf("%s: UpdateItem attributes %v", path, got)
			}
		})
	}
	if found != 1 {
		t.Fatalf("%d UpdateItem statements, want 1", found)
	}
}
