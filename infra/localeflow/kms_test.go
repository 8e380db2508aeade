package localeflow

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"
)

// TestCustomerManagedKeyEncryptsContent: the release table (source and
// result texts), the release queue and its DLQ, the quarantine queue and
// the key secrets used AWS-managed encryption only. By default the stack
// now has one customer-managed key with automatic rotation, retained like
// the tables, and every one of those resources names it.
func TestCustomerManagedKeyEncryptsContent(t *testing.T) {
	s := defaultSynth(t)
	s.count(t, "AWS::KMS::Key", 1)
	keyID := s.logicalID(t, "AWS::KMS::Key", DataKeyLogical)
	key := s.resources("AWS::KMS::Key")[keyID]
	if p := key["Properties"].(map[string]any); p["EnableKeyRotation"] != true {
		t.Errorf("key rotation %v", p["EnableKeyRotation"])
	}
	if key["DeletionPolicy"] != "Retain" || key["UpdateReplacePolicy"] != "Retain" {
		t.Errorf("key removal %v/%v, want Retain like the tables", key["DeletionPolicy"], key["UpdateReplacePolicy"])
	}
	keyArn := getAtt(keyID, "Arn")

	release := s.props(t, "AWS::DynamoDB::Table", s.topo.Release.Logical)
	if want := map[string]any{"SSEEnabled": true, "SSEType": "KMS", "KMSMasterKeyId": keyArn}; !jsonEqual(release["SSESpecification"], want) {
		t.Errorf("release table SSESpecification %v, want %v", release["SSESpecification"], want)
	}
	for _, logical := range []string{s.topo.RelQueue.Logical, s.topo.RelQueue.Logical + "DLQ", s.topo.Quarantine.Logical} {
		q := s.props(t, "AWS::SQS::Queue", logical)
		if !jsonEqual(q["KmsMasterKeyId"], keyArn) || q["SqsManagedSseEnabled"] != nil {
			t.Errorf("%s: KmsMasterKeyId %v SqsManagedSseEnabled %v", logical, q["KmsMasterKeyId"], q["SqsManagedSseEnabled"])
		}
	}
	// Content-free resources keep AWS-managed encryption.
	if q := s.props(t, "AWS::SQS::Queue", s.topo.PollQueue.Logical); q["KmsMasterKeyId"] != nil || q["SqsManagedSseEnabled"] != true {
		t.Errorf("poll queue %v", q)
	}
	for _, spec := range secretSpecs {
		if p := s.props(t, "AWS::SecretsManager::Secret", spec.Logical); !jsonEqual(p["KmsKeyId"], keyArn) {
			t.Errorf("secret %s KmsKeyId %v", spec.Logical, p["KmsKeyId"])
		}
	}
}

// TestDataKeyPolicy: the account administers the key and delegates its use
// through IAM; EventBridge may use it only from the rules that deliver to
// the (encrypted) release queue; nothing else is in the key policy.
func TestDataKeyPolicy(t *testing.T) {
	s := defaultSynth(t)
	p := s.props(t, "AWS::KMS::Key", DataKeyLogical)
	doc := p["KeyPolicy"].(map[string]any)
	sids := map[string]map[string]any{}
	for _, st := range asList(doc["Statement"]) {
		m := st.(map[string]any)
		sids[m["Sid"].(string)] = m
	}
	if len(sids) != 3 {
		t.Fatalf("key policy statements %v", sids)
	}
	if !slices.Contains(sortedStrings(sids["AccountAdministers"]["Action"]), "kms:PutKeyPolicy") {
		t.Error("the account cannot manage the key policy (lock-out)")
	}
	events := sids["EventBridgeDeliversToReleaseQueue"]
	if !jsonEqual(events["Principal"], map[string]any{"Service": "events.amazonaws.com"}) ||
		!slices.Equal(sortedStrings(events["Action"]), []string{"kms:Decrypt", "kms:GenerateDataKey"}) {
		t.Errorf("events statement %v", events)
	}
	arns, _ := events["Condition"].(map[string]any)["ArnEquals"].(map[string]any)["aws:SourceArn"].([]any)
	var rules []string
	for _, r := range s.topo.Rules {
		if r.TargetQueue == s.topo.RelQueue.Logical {
			rules = append(rules, r.Name)
		}
	}
	if len(rules) == 0 || len(arns) != len(rules) {
		t.Fatalf("events source ARNs %v, want one per release-queue rule %v", arns, rules)
	}
	for i, a := range arns {
		if raw := strings.Join(strings.Fields(mustJSON(t, a)), ""); !strings.Contains(raw, ":rule/"+s.topo.BusName+"/"+rules[i]) {
			t.Errorf("source ARN %s does not name rule %s", raw, rules[i])
		}
	}
}

// TestKeyGrantsPerFunction pins each function's use of the data key:
// actions, and the service it may use them through.
func TestKeyGrantsPerFunction(t *testing.T) {
	s := defaultSynth(t)
	keyArn := getAtt(s.logicalID(t, "AWS::KMS::Key", DataKeyLogical), "Arn")
	want := map[string][]string{
		"poller":      {"QueueDataKey kms:Decrypt,kms:GenerateDataKey via sqs", "SecretsDataKey kms:Decrypt via secretsmanager"},
		"coordinator": {"QueueDataKey kms:Decrypt,kms:GenerateDataKey via sqs", "ReleaseTableDataKey kms:Decrypt,kms:GenerateDataKey via dynamodb", "SecretsDataKey kms:Decrypt via secretsmanager"},
		"health":      {"ReleaseTableDataKey kms:Decrypt via dynamodb"},
	}
	for _, fn := range s.topo.Functions {
		roleID := s.logicalID(t, "AWS::IAM::Role", fn.Logical+"Role")
		var got []string
		for _, r := range s.resources("AWS::IAM::Policy") {
			p := r["Properties"].(map[string]any)
			if !jsonEqual(p["Roles"], []any{ref(roleID)}) {
				continue
			}
			statements(p, func(path string, st map[string]any) {
				actions := sortedStrings(st["Action"])
				if !strings.HasPrefix(actions[0], "kms:") {
					return
				}
				if !jsonEqual(st["Resource"], keyArn) {
					t.Errorf("%s: resource %v", path, st["Resource"])
				}
				via := mustJSON(t, st["Condition"].(map[string]any)["StringEquals"].(map[string]any)["kms:ViaService"])
				service := "?"
				for _, svc := range []string{"sqs", "secretsmanager", "dynamodb"} {
					if strings.Contains(via, `"`+svc+`.`) {
						service = svc
					}
				}
				got = append(got, st["Sid"].(string)+" "+strings.Join(actions, ",")+" via "+service)
			})
		}
		sort.Strings(got)
		if !slices.Equal(got, want[fn.Dir]) {
			t.Errorf("%s key grants\n got %v\nwant %v", fn.Dir, got, want[fn.Dir])
		}
	}
}

// TestCustomerManagedKeyOff: CustomerManagedKey false keeps AWS-managed
// encryption everywhere and grants no key use; synth says so.
func TestCustomerManagedKeyOff(t *testing.T) {
	p := testProps()
	p.CustomerManagedKey = jsii.Bool(false)
	s := synth(t, p)
	s.count(t, "AWS::KMS::Key", 0)
	for _, q := range s.resources("AWS::SQS::Queue") {
		if props := q["Properties"].(map[string]any); props["SqsManagedSseEnabled"] != true || props["KmsMasterKeyId"] != nil {
			t.Errorf("queue %v", props)
		}
	}
	if raw := mustJSON(t, s.raw["Resources"]); strings.Contains(raw, `"kms:`) {
		t.Error("a statement uses kms actions without the key")
	}
	cfg, err := resolve(p)
	if err != nil || !strings.HasPrefix(cfg.EncryptionLine(), "customer-managed KMS key: off") {
		t.Fatalf("%q %v", cfg.EncryptionLine(), err)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
