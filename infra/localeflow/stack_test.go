package localeflow

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/topology"
)

func TestFunctionsRuntimeArchHandler(t *testing.T) {
	s := defaultSynth(t)
	s.count(t, "AWS::Lambda::Function", len(s.topo.Functions))
	if len(s.topo.Functions) != 3 {
		t.Fatalf("topology has %d functions, want 3", len(s.topo.Functions))
	}
	for _, fn := range s.topo.Functions {
		t.Run(fn.Dir, func(t *testing.T) {
			p := s.props(t, "AWS::Lambda::Function", fn.Logical)
			want := map[string]any{
				"FunctionName":  fn.Name,
				"Runtime":       "provided.al2023",
				"Architectures": []any{"arm64"},
				"Handler":       "bootstrap",
				"MemorySize":    float64(fn.MemoryMB),
				"Timeout":       float64(fn.TimeoutSeconds),
			}
			for k, v := range want {
				if !jsonEqual(p[k], v) {
					t.Errorf("%s = %v, want %v", k, p[k], v)
				}
			}
			if _, ok := p["ReservedConcurrentExecutions"]; ok {
				t.Errorf("reserved concurrency set by default: %v", p["ReservedConcurrentExecutions"])
			}
		})
	}
}

func TestFunctionSizingProps(t *testing.T) {
	props := testProps()
	props.Functions = map[string]FunctionOptions{
		"poller": {MemoryMB: 512, TimeoutSeconds: 300, ReservedConcurrency: 4},
		"health": {ReservedConcurrency: 1},
	}
	s := synth(t, props)
	s.has(t, "AWS::Lambda::Function", map[string]any{
		"FunctionName": "localeflow-poller", "MemorySize": 512, "Timeout": 300, "ReservedConcurrentExecutions": 4,
	})
	s.has(t, "AWS::Lambda::Function", map[string]any{
		"FunctionName": "localeflow-health", "MemorySize": 256, "Timeout": topology.HealthTimeoutSeconds, "ReservedConcurrentExecutions": 1,
	})
	// The consumer's longer timeout raises its queue's visibility to 6×;
	// the other queue keeps the topology value.
	s.has(t, "AWS::SQS::Queue", map[string]any{"QueueName": "localeflow-poll", "VisibilityTimeout": 1800})
	s.has(t, "AWS::SQS::Queue", map[string]any{"QueueName": "localeflow-release", "VisibilityTimeout": s.topo.RelQueue.VisibilityTimeoutSeconds})
}

func TestFunctionCodeIsTheBuiltBootstrap(t *testing.T) {
	s := defaultSynth(t)
	// Each function has its own asset: the directory build/<fn>, whose only
	// file is the bootstrap (each dummy differs, so the hashes must too).
	keys := map[string]string{}
	for _, fn := range s.topo.Functions {
		code := s.props(t, "AWS::Lambda::Function", fn.Logical)["Code"].(map[string]any)
		key, _ := code["S3Key"].(string)
		if !strings.HasSuffix(key, ".zip") {
			t.Errorf("%s: code S3Key %q is not a zip asset", fn.Dir, key)
		}
		keys[key] = fn.Dir
	}
	if len(keys) != len(s.topo.Functions) {
		t.Errorf("functions share code assets: %v", keys)
	}
}

func TestFunctionEnvironment(t *testing.T) {
	s := defaultSynth(t)
	monitor := ref(s.logicalID(t, "AWS::DynamoDB::Table", s.topo.Monitor.Logical))
	release := ref(s.logicalID(t, "AWS::DynamoDB::Table", s.topo.Release.Logical))
	pollURL := ref(s.logicalID(t, "AWS::SQS::Queue", s.topo.PollQueue.Logical))
	relURL := ref(s.logicalID(t, "AWS::SQS::Queue", s.topo.RelQueue.Logical))
	quarantineURL := ref(s.logicalID(t, "AWS::SQS::Queue", s.topo.Quarantine.Logical))
	bus := ref(s.logicalID(t, "AWS::Events::EventBus", "EventBus"))
	want := map[string]map[string]any{
		"poller": {
			EnvMonitorTable: monitor, EnvPollQueueURL: pollURL, EnvEventBus: bus, EnvQuarantineQueueURL: quarantineURL,
			EnvCMSBaseURL: "https://cms.example.com", EnvCMSKeySecret: ref("CMSKeySecret"),
			EnvEventKeySecret: ref("EventKeySecret"), EnvMaxFailures: "5", EnvRetryMaxDelay: "5m0s",
			EnvDeployment: "localeflow", EnvMonitorRetention: "2160h0m0s",
			EnvSweepGrace: "30s",
		},
		"coordinator": {
			EnvReleaseTable: release, EnvReleaseQueueURL: relURL, EnvEventBus: bus, EnvQuarantineQueueURL: quarantineURL,
			EnvCMSBaseURL: "https://cms.example.com", EnvEvidenceBaseURL: "https://evidence.example.com/api",
			EnvCMSKeySecret: ref("CMSKeySecret"), EnvEventKeySecret: ref("EventKeySecret"), EnvEvidenceKeySecret: ref("EvidenceKeySecret"),
			EnvApprovalKeySecret: ref("ApprovalKeySecret"), EnvPublicationKeySecret: ref("PublicationKeySecret"),
			EnvReceiptIssuersQuality:           "qa-vendor=" + issuerKey + ",qa-backup=" + strings.Repeat("ab", 32),
			EnvReceiptIssuersHumanReview:       "review-desk=" + humanKey,
			EnvReceiptIssuersIndependentReview: "review-beta=" + reviewKey,
			EnvTextRetention:                   "168h0m0s",
			EnvMonitorRetention:                "2160h0m0s",
			EnvDeployment:                      "localeflow",
		},
		"health": {EnvMonitorTable: monitor, EnvReleaseTable: release, EnvEventBus: bus, EnvDeployment: "localeflow"},
	}
	for _, fn := range s.topo.Functions {
		t.Run(fn.Dir, func(t *testing.T) {
			env := s.props(t, "AWS::Lambda::Function", fn.Logical)["Environment"].(map[string]any)["Variables"]
			if !jsonEqual(env, want[fn.Dir]) {
				t.Errorf("environment\n got %v\nwant %v", env, want[fn.Dir])
			}
		})
	}
}

func TestSecretsNeverInEnvironment(t *testing.T) {
	s := defaultSynth(t)
	secretIDs := map[string]bool{}
	public := map[string]bool{}
	for _, ts := range topology.Secrets {
		if ts.PublicLogical != "" {
			public[s.logicalID(t, "AWS::SecretsManager::Secret", ts.PublicLogical)] = true
		}
	}
	for id, r := range s.resources("AWS::SecretsManager::Secret") {
		p := r["Properties"].(map[string]any)
		if public[id] {
			// A public-key secret starts with the placeholder the
			// coordinator replaces: no key material.
			if p["SecretString"] != topology.PublicKeysUnpublished || p["GenerateSecretString"] != nil {
				t.Errorf("public-key secret %s: SecretString %v", id, p["SecretString"])
			}
			continue
		}
		secretIDs[id] = true
		if _, ok := p["SecretString"]; ok {
			t.Errorf("secret %s has a SecretString in the template", id)
		}
	}
	if len(secretIDs) != len(secretSpecs) || len(public) != 2 {
		t.Fatalf("%d key secrets and %d public-key secrets, want %d and 2", len(secretIDs), len(public), len(secretSpecs))
	}
	for id, r := range s.resources("AWS::Lambda::Function") {
		vars := r["Properties"].(map[string]any)["Environment"].(map[string]any)["Variables"].(map[string]any)
		for k, v := range vars {
			text := fmt.Sprint(v)
			if strings.Contains(text, "resolve:secretsmanager") || strings.Contains(text, "SecretString") {
				t.Errorf("%s %s resolves a secret value: %v", id, k, v)
			}
			if !strings.HasSuffix(k, "_SECRET_ARN") {
				continue
			}
			m, ok := v.(map[string]any)
			if !ok || len(m) != 1 || !secretIDs[fmt.Sprint(m["Ref"])] {
				t.Errorf("%s %s = %v, want a Ref to a secret (its ARN)", id, k, v)
			}
		}
	}
}

func TestSecretsGeneratedAsHex(t *testing.T) {
	s := defaultSynth(t)
	// 64 characters from 0-9a-f: the hex SecretString the functions decode
	// (32 bytes: an HMAC key or an Ed25519 seed).
	want := map[string]any{
		"PasswordLength":     64,
		"ExcludeUppercase":   true,
		"ExcludePunctuation": true,
		"ExcludeCharacters":  "ghijklmnopqrstuvwxyz",
	}
	alphabet := ""
	for c := 'a'; c <= 'z'; c++ {
		if !strings.ContainsRune(want["ExcludeCharacters"].(string), c) {
			alphabet += string(c)
		}
	}
	if alphabet != "abcdef" {
		t.Fatalf("lowercase letters left: %q", alphabet)
	}
	for _, spec := range secretSpecs {
		t.Run(spec.Logical, func(t *testing.T) {
			p := s.props(t, "AWS::SecretsManager::Secret", spec.Logical)
			if p["Name"] != "localeflow/"+spec.Stem {
				t.Errorf("Name = %v", p["Name"])
			}
			if !jsonEqual(p["GenerateSecretString"], want) {
				t.Errorf("GenerateSecretString = %v, want %v", p["GenerateSecretString"], want)
			}
		})
	}
}

func TestTablesBillingPITRDeletionProtection(t *testing.T) {
	s := defaultSynth(t)
	s.count(t, "AWS::DynamoDB::Table", 2)
	for _, table := range s.topo.Tables() {
		t.Run(table.Logical, func(t *testing.T) {
			id := s.logicalID(t, "AWS::DynamoDB::Table", table.Logical)
			r := s.resources("AWS::DynamoDB::Table")[id]
			p := r["Properties"].(map[string]any)
			keys := []any{map[string]any{"AttributeName": table.Partition.Name, "KeyType": "HASH"}}
			if table.Sort != nil {
				keys = append(keys, map[string]any{"AttributeName": table.Sort.Name, "KeyType": "RANGE"})
			}
			want := map[string]any{
				"TableName":                        table.Name,
				"BillingMode":                      "PAY_PER_REQUEST",
				"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
				"DeletionProtectionEnabled":        true,
				"KeySchema":                        keys,
			}
			for k, v := range want {
				if !jsonEqual(p[k], v) {
					t.Errorf("%s = %v, want %v", k, p[k], v)
				}
			}
			if r["DeletionPolicy"] != "Retain" {
				t.Errorf("DeletionPolicy = %v, want Retain", r["DeletionPolicy"])
			}
		})
	}
}

func TestDeletionProtectionOff(t *testing.T) {
	props := testProps()
	props.DeletionProtection = jsii.Bool(false)
	s := synth(t, props)
	for _, typ := range []string{"AWS::DynamoDB::Table", "AWS::SecretsManager::Secret", "AWS::Logs::LogGroup"} {
		for id, r := range s.resources(typ) {
			if r["DeletionPolicy"] != "Delete" {
				t.Errorf("%s DeletionPolicy = %v, want Delete", id, r["DeletionPolicy"])
			}
			if typ == "AWS::DynamoDB::Table" && r["Properties"].(map[string]any)["DeletionProtectionEnabled"] != false {
				t.Errorf("%s deletion protection still on", id)
			}
		}
	}
}

func TestTablesSparseIndexesKeysOnly(t *testing.T) {
	s := defaultSynth(t)
	for _, table := range s.topo.Tables() {
		t.Run(table.Logical, func(t *testing.T) {
			p := s.props(t, "AWS::DynamoDB::Table", table.Logical)
			types := map[string]any{}
			for _, d := range asList(p["AttributeDefinitions"]) {
				m := d.(map[string]any)
				types[m["AttributeName"].(string)] = m["AttributeType"]
			}
			got := map[string]map[string]any{}
			for _, g := range asList(p["GlobalSecondaryIndexes"]) {
				m := g.(map[string]any)
				got[m["IndexName"].(string)] = m
			}
			if len(got) != len(table.Indexes) {
				t.Fatalf("indexes %v, want %d", got, len(table.Indexes))
			}
			for _, ix := range table.Indexes {
				g, ok := got[ix.Name]
				if !ok {
					t.Fatalf("index %s missing", ix.Name)
				}
				wantKeys := []any{
					map[string]any{"AttributeName": ix.Partition.Name, "KeyType": "HASH"},
					map[string]any{"AttributeName": ix.Sort.Name, "KeyType": "RANGE"},
				}
				if !jsonEqual(g["KeySchema"], wantKeys) {
					t.Errorf("%s keys = %v, want %v", ix.Name, g["KeySchema"], wantKeys)
				}
				if !jsonEqual(g["Projection"], map[string]any{"ProjectionType": "KEYS_ONLY"}) {
					t.Errorf("%s projection = %v, want KEYS_ONLY", ix.Name, g["Projection"])
				}
				for _, k := range []topology.Key{ix.Partition, ix.Sort} {
					if types[k.Name] != string(k.Type) {
						t.Errorf("%s attribute %s type %v, want %s", ix.Name, k.Name, types[k.Name], k.Type)
					}
				}
			}
		})
	}
}

func TestReleaseTableTTL(t *testing.T) {
	s := defaultSynth(t)
	for _, table := range s.topo.Tables() {
		ttl := s.props(t, "AWS::DynamoDB::Table", table.Logical)["TimeToLiveSpecification"]
		if table.TTLAttribute == "" {
			if ttl != nil {
				t.Errorf("%s has TTL %v, want none", table.Logical, ttl)
			}
			continue
		}
		want := map[string]any{"AttributeName": table.TTLAttribute, "Enabled": true}
		if !jsonEqual(ttl, want) {
			t.Errorf("%s TTL = %v, want %v", table.Logical, ttl, want)
		}
	}
	// Finished monitor records expire too (only those that need no
	// attention: the poller sets expires_at on them alone).
	if s.topo.Monitor.TTLAttribute != topology.AttrExpiresAt {
		t.Fatalf("monitor table TTL attribute %q", s.topo.Monitor.TTLAttribute)
	}
	if s.topo.Release.TTLAttribute != topology.AttrExpiresAt {
		t.Fatalf("release table TTL attribute %q", s.topo.Release.TTLAttribute)
	}
}

func TestQueuesDLQRedriveVisibility(t *testing.T) {
	s := defaultSynth(t)
	s.count(t, "AWS::SQS::Queue", 6) // 2 queues, their DLQs, the quarantine queue, the event DLQ
	for _, q := range s.topo.Queues() {
		t.Run(q.Logical, func(t *testing.T) {
			dlqID := s.logicalID(t, "AWS::SQS::Queue", q.Logical+"DLQ")
			p := s.props(t, "AWS::SQS::Queue", q.Logical)
			want := map[string]any{
				"QueueName":              q.Name,
				"VisibilityTimeout":      q.VisibilityTimeoutSeconds,
				"MessageRetentionPeriod": q.RetentionSeconds,
				"RedrivePolicy": map[string]any{
					"deadLetterTargetArn": getAtt(dlqID, "Arn"),
					"maxReceiveCount":     q.MaxReceiveCount,
				},
			}
			for k, v := range want {
				if !jsonEqual(p[k], v) {
					t.Errorf("%s = %v, want %v", k, p[k], v)
				}
			}
			// Encrypted: the release queue and its DLQ with the data key
			// (TestCustomerManagedKeyEncryptsContent), the poll queue's with
			// SQS-managed keys.
			encrypted := func(props map[string]any) bool {
				if q.Logical == s.topo.RelQueue.Logical {
					return props["KmsMasterKeyId"] != nil
				}
				return props["SqsManagedSseEnabled"] == true
			}
			if !encrypted(p) {
				t.Errorf("queue not encrypted: %v", p)
			}
			dlq := s.props(t, "AWS::SQS::Queue", q.Logical+"DLQ")
			if dlq["QueueName"] != q.DLQName || !encrypted(dlq) ||
				!jsonEqual(dlq["MessageRetentionPeriod"], q.DLQRetentionSeconds) {
				t.Errorf("DLQ = %v", dlq)
			}
			// Visibility must cover 6 consumer timeouts, so a message is not
			// redelivered while a slow invocation still works on it.
			var consumer topology.Function
			for _, fn := range s.topo.Functions {
				if fn.Queue == q.Logical {
					consumer = fn
				}
			}
			fn := s.props(t, "AWS::Lambda::Function", consumer.Logical)
			if vis, timeout := p["VisibilityTimeout"].(float64), fn["Timeout"].(float64); vis < 6*timeout {
				t.Errorf("visibility %v < 6 × consumer timeout %v", vis, timeout)
			}
		})
	}
}

func TestQueuesRequireTLS(t *testing.T) {
	s := defaultSynth(t)
	for _, construct := range []string{"PollQueue", "PollQueueDLQ", "ReleaseQueue", "ReleaseQueueDLQ"} {
		t.Run(construct, func(t *testing.T) {
			id := s.logicalID(t, "AWS::SQS::Queue", construct)
			found := false
			for _, r := range s.resources("AWS::SQS::QueuePolicy") {
				p := r["Properties"].(map[string]any)
				if !jsonEqual(p["Queues"], []any{ref(id)}) {
					continue
				}
				statements(p, func(_ string, st map[string]any) {
					cond, _ := st["Condition"].(map[string]any)
					if st["Effect"] == "Deny" && jsonEqual(st["Principal"], map[string]any{"AWS": "*"}) &&
						jsonEqual(cond, map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}}) &&
						slices.Equal(sortedStrings(st["Action"]), sqsActions) {
						found = true
					}
				})
			}
			if !found {
				t.Errorf("no TLS-only Deny on %s", construct)
			}
		})
	}
}

func TestRulesRouteDetailTypesToQueues(t *testing.T) {
	s := defaultSynth(t)
	bus := s.logicalID(t, "AWS::Events::EventBus", "EventBus")
	s.has(t, "AWS::Events::EventBus", map[string]any{"Name": s.topo.BusName})
	for _, rule := range s.topo.Rules {
		t.Run(rule.Logical, func(t *testing.T) {
			ruleID := s.logicalID(t, "AWS::Events::Rule", rule.Logical)
			queueID := s.logicalID(t, "AWS::SQS::Queue", rule.TargetQueue)
			p := s.props(t, "AWS::Events::Rule", rule.Logical)
			if p["Name"] != rule.Name || !jsonEqual(p["EventBusName"], ref(bus)) || p["State"] != "ENABLED" {
				t.Errorf("rule = %v", p)
			}
			if !jsonEqual(p["EventPattern"], rule.EventPattern()) {
				t.Errorf("pattern = %v, want %v", p["EventPattern"], rule.EventPattern())
			}
			targets := asList(p["Targets"])
			if len(targets) != 1 || !jsonEqual(targets[0].(map[string]any)["Arn"], getAtt(queueID, "Arn")) {
				t.Errorf("targets = %v, want the %s queue", targets, rule.TargetQueue)
			}
			// The queue policy lets exactly this rule send.
			allowed := false
			for _, r := range s.resources("AWS::SQS::QueuePolicy") {
				statements(r["Properties"], func(_ string, st map[string]any) {
					cond := fmt.Sprint(st["Condition"])
					if st["Effect"] == "Allow" && jsonEqual(st["Principal"], map[string]any{"Service": "events.amazonaws.com"}) &&
						slices.Contains(sortedStrings(st["Action"]), "sqs:SendMessage") &&
						jsonEqual(st["Resource"], getAtt(queueID, "Arn")) && strings.Contains(cond, ruleID) {
						allowed = true
					}
				})
			}
			if !allowed {
				t.Errorf("no queue policy lets rule %s send to %s", ruleID, queueID)
			}
		})
	}
	// Every input detail-type is routed, each exactly once.
	routed := map[string]int{}
	for _, rule := range s.topo.Rules {
		for _, dt := range rule.DetailTypes {
			routed[dt]++
		}
	}
	for _, dt := range []string{contract.DetailChangeDispatched, contract.DetailPlanAccepted, contract.DetailJobCompleted, contract.DetailChangeHint} {
		if routed[dt] != 1 {
			t.Errorf("detail-type %s routed %d times", dt, routed[dt])
		}
	}
}

// TestChangeHintRuleTargetsPollQueue: the template routes
// localeflow.change.hint from the bus to the poll queue (and nowhere else).
func TestChangeHintRuleTargetsPollQueue(t *testing.T) {
	s := defaultSynth(t)
	queueID := s.logicalID(t, "AWS::SQS::Queue", "PollQueue")
	p := s.props(t, "AWS::Events::Rule", "ChangeHintRule")
	want := map[string]any{"source": []any{contract.EventSource}, "detail-type": []any{contract.DetailChangeHint}}
	if !jsonEqual(p["EventPattern"], want) {
		t.Errorf("pattern = %v, want %v", p["EventPattern"], want)
	}
	targets := asList(p["Targets"])
	if len(targets) != 1 || !jsonEqual(targets[0].(map[string]any)["Arn"], getAtt(queueID, "Arn")) {
		t.Errorf("targets = %v, want the poll queue", targets)
	}
	if p["Name"] != topology.DefaultPrefix+"-change-hint" {
		t.Errorf("name = %v", p["Name"])
	}
}

func TestSchedulesInvokeFunctions(t *testing.T) {
	s := defaultSynth(t)
	// + the data key's state rule (on the default bus, CloudTrail).
	s.count(t, "AWS::Events::Rule", len(s.topo.Rules)+len(s.topo.Schedules)+1)
	for _, sch := range s.topo.Schedules {
		t.Run(sch.Logical, func(t *testing.T) {
			var fn topology.Function
			for _, f := range s.topo.Functions {
				if f.Dir == sch.Function {
					fn = f
				}
			}
			fnID := s.logicalID(t, "AWS::Lambda::Function", fn.Logical)
			ruleID := s.logicalID(t, "AWS::Events::Rule", sch.Logical)
			p := s.props(t, "AWS::Events::Rule", sch.Logical)
			unit := "minutes"
			if sch.RateMinutes == 1 {
				unit = "minute"
			}
			if want := fmt.Sprintf("rate(%d %s)", sch.RateMinutes, unit); p["ScheduleExpression"] != want {
				t.Errorf("schedule = %v, want %s", p["ScheduleExpression"], want)
			}
			if _, onBus := p["EventBusName"]; onBus {
				t.Errorf("schedule on a custom bus (schedules run only on the default bus)")
			}
			targets := asList(p["Targets"])
			if len(targets) != 1 || !jsonEqual(targets[0].(map[string]any)["Arn"], getAtt(fnID, "Arn")) {
				t.Errorf("targets = %v, want %s", targets, fnID)
			}
			s.has(t, "AWS::Lambda::Permission", map[string]any{
				"Action":       "lambda:InvokeFunction",
				"FunctionName": getAtt(fnID, "Arn"),
				"Principal":    "events.amazonaws.com",
				"SourceArn":    getAtt(ruleID, "Arn"),
			})
		})
	}
}

func TestEventSourceMappingsReportBatchItemFailures(t *testing.T) {
	s := defaultSynth(t)
	s.count(t, "AWS::Lambda::EventSourceMapping", len(s.topo.Queues()))
	for _, fn := range s.topo.Functions {
		if fn.Queue == "" {
			continue
		}
		t.Run(fn.Dir, func(t *testing.T) {
			q, _ := s.topo.QueueByLogical(fn.Queue)
			s.has(t, "AWS::Lambda::EventSourceMapping", map[string]any{
				"FunctionName":          ref(s.logicalID(t, "AWS::Lambda::Function", fn.Logical)),
				"EventSourceArn":        getAtt(s.logicalID(t, "AWS::SQS::Queue", fn.Queue), "Arn"),
				"BatchSize":             q.BatchSize,
				"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
			})
		})
	}
}

func TestHealthFunctionURLUsesIAMAuth(t *testing.T) {
	s := defaultSynth(t)
	s.count(t, "AWS::Lambda::Url", 1)
	health := s.logicalID(t, "AWS::Lambda::Function", s.topo.Functions[2].Logical)
	if s.topo.Functions[2].Dir != "health" {
		t.Fatalf("third function is %s", s.topo.Functions[2].Dir)
	}
	s.has(t, "AWS::Lambda::Url", map[string]any{
		"AuthType":          "AWS_IAM",
		"TargetFunctionArn": getAtt(health, "Arn"),
	})
	// IAM auth needs no resource policy; a public permission would undo it.
	for id, r := range s.resources("AWS::Lambda::Permission") {
		p := r["Properties"].(map[string]any)
		if p["Principal"] == "*" || p["FunctionUrlAuthType"] == "NONE" {
			t.Errorf("permission %s opens the function: %v", id, p)
		}
	}
	noPanic(t, func() { s.template.HasOutput(jsii.String("HealthUrl"), map[string]any{}) })
}

// deploymentDim is the Deployment dimension of the default stack's custom
// metrics.
var deploymentDim = map[string]any{"Name": DeploymentDimension, "Value": topology.DefaultPrefix}

func TestAlarms(t *testing.T) {
	s := defaultSynth(t)
	// DLQ depth and oldest message per queue, health blocked, rejected
	// messages and key reload failures per consumer, errors and throttles
	// per function; failed invocations per rule and schedule, the event
	// DLQ's depth, the oldest due record and the health heartbeat
	// (oncall_test.go).
	// (The exact set: TestAlarmCatalogue.)
	s.count(t, "AWS::CloudWatch::Alarm", len(alarmCatalogue(t, s)))
	for _, q := range s.topo.Queues() {
		s.has(t, "AWS::CloudWatch::Alarm", map[string]any{
			"AlarmName":          q.DLQName + "-depth",
			"Namespace":          "AWS/SQS",
			"MetricName":         "ApproximateNumberOfMessagesVisible",
			"Dimensions":         []any{map[string]any{"Name": "QueueName", "Value": getAtt(s.logicalID(t, "AWS::SQS::Queue", q.Logical+"DLQ"), "QueueName")}},
			"ComparisonOperator": "GreaterThanThreshold",
			"Threshold":          0,
		})
		s.has(t, "AWS::CloudWatch::Alarm", map[string]any{
			"AlarmName":          q.Name + "-oldest-message",
			"Namespace":          "AWS/SQS",
			"MetricName":         "ApproximateAgeOfOldestMessage",
			"Dimensions":         []any{map[string]any{"Name": "QueueName", "Value": getAtt(s.logicalID(t, "AWS::SQS::Queue", q.Logical), "QueueName")}},
			"ComparisonOperator": "GreaterThanThreshold",
			"Threshold":          oldestMessageAlarmSeconds,
		})
	}
	for _, fn := range s.topo.Functions {
		for _, m := range []string{"Errors", "Throttles"} {
			s.has(t, "AWS::CloudWatch::Alarm", map[string]any{
				"AlarmName":          fn.Name + "-" + strings.ToLower(m),
				"Namespace":          "AWS/Lambda",
				"MetricName":         m,
				"Dimensions":         []any{map[string]any{"Name": "FunctionName", "Value": ref(s.logicalID(t, "AWS::Lambda::Function", fn.Logical))}},
				"ComparisonOperator": "GreaterThanThreshold",
				"Threshold":          0,
			})
		}
	}
}

// TestHealthAlarmBreachesOnMissingData: the health alarm treated missing
// data as not breaching, so a health function that stopped running (or
// could not write its metric) left the alarm OK forever. Missing reports
// are now the heartbeat alarm's, which breaches on them (its shape:
// TestHealthHeartbeatAlarmShape); a blocked report still pages.
func TestHealthAlarmBreachesOnMissingData(t *testing.T) {
	s := defaultSynth(t)
	s.has(t, "AWS::CloudWatch::Alarm", map[string]any{
		"AlarmName":          "localeflow-health-blocked",
		"Namespace":          HealthMetricNamespace,
		"MetricName":         contract.MetricHealthBlockedOperations,
		"Dimensions":         []any{deploymentDim},
		"ComparisonOperator": "GreaterThanOrEqualToThreshold",
		"Threshold":          1,
	})
	s.has(t, "AWS::CloudWatch::Alarm", map[string]any{
		"AlarmName":        "localeflow-health-heartbeat",
		"MetricName":       HealthBlockedMetricName,
		"Dimensions":       []any{deploymentDim},
		"TreatMissingData": "breaching",
	})
}

// TestAlarmsSelectTheirDeployment: the custom metrics had no deployment
// dimension, so two stacks in one account shared one series and tripped
// each other's alarms. Every custom-metric alarm now selects its own
// prefix; AWS metrics are selected by the stack's own (prefixed) resources.
func TestAlarmsSelectTheirDeployment(t *testing.T) {
	props := testProps()
	props.Prefix = "acme-dev"
	s := synth(t, props)
	for id, r := range s.resources("AWS::CloudWatch::Alarm") {
		p := r["Properties"].(map[string]any)
		if p["Metrics"] != nil {
			// Metric math (the DynamoDB alarms): every metric names this
			// stack's table (a Ref), and an index by its name.
			for _, m := range asList(p["Metrics"]) {
				stat, _ := m.(map[string]any)["MetricStat"].(map[string]any)
				if stat == nil {
					continue
				}
				metric := stat["Metric"].(map[string]any)
				for _, d := range asList(metric["Dimensions"]) {
					dm := d.(map[string]any)
					if _, isRef := dm["Value"].(map[string]any); dm["Name"] == "TableName" && !isRef {
						t.Errorf("%s selects table %v", id, dm["Value"])
					}
				}
				if metric["Namespace"] != "AWS/DynamoDB" {
					t.Errorf("%s metric %v", id, metric)
				}
			}
			continue
		}
		dims := asList(p["Dimensions"])
		if len(dims) == 0 {
			t.Errorf("%s has no dimensions", id)
			continue
		}
		if p["Namespace"] == "AWS/Events" {
			// AWS/Events: the rule's name (prefixed) and, for a bus rule,
			// this stack's bus (a reference).
			for _, d := range dims {
				v := d.(map[string]any)["Value"]
				if name, ok := v.(string); ok && !strings.HasPrefix(name, "acme-dev-") {
					t.Errorf("%s dimensions %v", id, dims)
				}
				if _, ok := v.(map[string]any); ok && d.(map[string]any)["Name"] != "EventBusName" {
					t.Errorf("%s dimensions %v", id, dims)
				}
			}
			continue
		}
		if p["Namespace"] != HealthMetricNamespace {
			// AWS/SQS and AWS/Lambda: one dimension naming a resource of this
			// stack (Ref or GetAtt), whose name carries the prefix.
			v, _ := dims[0].(map[string]any)["Value"].(map[string]any)
			if len(dims) != 1 || v == nil {
				t.Errorf("%s dimensions %v", id, dims)
			}
			continue
		}
		found := false
		for _, d := range dims {
			if jsonEqual(d, map[string]any{"Name": DeploymentDimension, "Value": "acme-dev"}) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s (%v) does not select Deployment=acme-dev: %v", id, p["MetricName"], dims)
		}
	}
	// The functions are told their deployment, so their metrics carry it.
	for _, fn := range s.topo.Functions {
		env := s.props(t, "AWS::Lambda::Function", fn.Logical)["Environment"].(map[string]any)["Variables"].(map[string]any)
		if env[EnvDeployment] != "acme-dev" {
			t.Errorf("%s: %s = %v", fn.Dir, EnvDeployment, env[EnvDeployment])
		}
	}
}

// TestAlarmTopicCreatedByDefault: with no topic ARN every alarm notified
// nobody; the stack now creates <prefix>-alarms (TLS only) and every alarm
// notifies it, with an optional e-mail subscription.
func TestAlarmTopicCreatedByDefault(t *testing.T) {
	props := testProps()
	props.AlarmEmail = "oncall@example.com"
	s := synth(t, props)
	// A page topic and a ticket topic, the e-mail subscribed to both;
	// no OK actions by default (TestAlarmCatalogue: which alarm where).
	s.count(t, "AWS::SNS::Topic", 2)
	s.has(t, "AWS::SNS::Topic", map[string]any{"TopicName": "localeflow-alarms"})
	s.has(t, "AWS::SNS::Topic", map[string]any{"TopicName": "localeflow-tickets"})
	s.count(t, "AWS::SNS::Subscription", 2)
	s.has(t, "AWS::SNS::Subscription", map[string]any{"Protocol": "email", "Endpoint": "oncall@example.com"})
	topics := []any{ref(s.logicalID(t, "AWS::SNS::Topic", "AlarmTopic")), ref(s.logicalID(t, "AWS::SNS::Topic", "TicketTopic"))}
	alarms := s.resources("AWS::CloudWatch::Alarm")
	for id, r := range alarms {
		p := r["Properties"].(map[string]any)
		actions := asList(p["AlarmActions"])
		if len(actions) != 1 || !(jsonEqual(actions[0], topics[0]) || jsonEqual(actions[0], topics[1])) || p["OKActions"] != nil {
			t.Errorf("%s actions = %v / %v", id, p["AlarmActions"], p["OKActions"])
		}
	}
	cfg, err := resolve(props)
	if err != nil || !strings.Contains(cfg.AlarmsLine(), "localeflow-alarms") || !strings.Contains(cfg.AlarmsLine(), "oncall@example.com") {
		t.Fatalf("alarms line %q, %v", cfg.AlarmsLine(), err)
	}
}

func TestAlarmTopicNotifiedByEveryAlarm(t *testing.T) {
	props := testProps()
	props.AlarmTopicArn = "arn:aws:sns:eu-west-1:123456789012:ops"
	s := synth(t, props)
	s.count(t, "AWS::SNS::Topic", 0)
	alarms := s.resources("AWS::CloudWatch::Alarm")
	if len(alarms) == 0 {
		t.Fatal("no alarms")
	}
	for id, r := range alarms {
		if !jsonEqual(r["Properties"].(map[string]any)["AlarmActions"], []any{props.AlarmTopicArn}) {
			t.Errorf("%s actions = %v", id, r["Properties"].(map[string]any)["AlarmActions"])
		}
	}
	cfg, err := resolve(props)
	if err != nil || !strings.Contains(cfg.AlarmsLine(), "existing SNS topic "+props.AlarmTopicArn) {
		t.Fatalf("alarms line %q, %v", cfg.AlarmsLine(), err)
	}
}

func TestDashboard(t *testing.T) {
	s := defaultSynth(t)
	s.count(t, "AWS::CloudWatch::Dashboard", 1)
	p := s.props(t, "AWS::CloudWatch::Dashboard", "Dashboard")
	if p["DashboardName"] != "localeflow-operations" {
		t.Fatalf("dashboard name %v", p["DashboardName"])
	}
	body, err := json.Marshal(p["DashboardBody"])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Invocations", "MonitorDue", "MonitorFailed", "MonitorRemoteFailures", "MessagesRejected",
		"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage", "EvidenceFailed", "DeliveryFailed", HealthBlockedMetricName,
		// Polls and outcomes, failures by code, oldest due age, evidence
		// and delivery outcomes (emitted by the poller, coordinator and
		// health function).
		contract.MetricPolls, contract.MetricPollFailures, contract.MetricOldestDueSeconds,
		contract.MetricEvidenceSteps, contract.MetricDeliverySteps, contract.MetricEvidenceFailures, contract.MetricDeliveryFailures} {
		if !strings.Contains(string(body), want) {
			t.Errorf("dashboard has no %s", want)
		}
	}
}

// joinedStrings concatenates the literal strings of a template value
// (Fn::Join parts; tokens such as Ref are left out).
func joinedStrings(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var b strings.Builder
		for _, e := range x {
			b.WriteString(joinedStrings(e))
		}
		return b.String()
	case map[string]any:
		if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
			return joinedStrings(j[1])
		}
	}
	return ""
}

// TestDashboardAndAlarmsUseEmittedMetrics: every custom metric the
// dashboard and the alarms select is one a function emits (contract.Metrics,
// which the functions' own tests hold to what they write); a name nobody
// emits would be an empty graph or an alarm on missing data.
func TestDashboardAndAlarmsUseEmittedMetrics(t *testing.T) {
	s := defaultSynth(t)
	body := joinedStrings(s.props(t, "AWS::CloudWatch::Dashboard", "Dashboard")["DashboardBody"])
	var referenced []string
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`\["` + contract.MetricNamespace + `","([A-Za-z0-9]+)"`),
		regexp.MustCompile(`MetricName=\\"([A-Za-z0-9]+)\\"`),
	} {
		for _, m := range re.FindAllStringSubmatch(body, -1) {
			referenced = append(referenced, m[1])
		}
	}
	if len(referenced) < 10 {
		t.Fatalf("found only %v in the dashboard body:\n%s", referenced, body)
	}
	for id, r := range s.resources("AWS::CloudWatch::Alarm") {
		p, _ := r["Properties"].(map[string]any)
		if p["Namespace"] == contract.MetricNamespace {
			name, _ := p["MetricName"].(string)
			referenced = append(referenced, name)
			if _, ok := contract.Metrics[name]; !ok {
				t.Errorf("alarm %s selects %q, which no function emits", id, name)
			}
		}
	}
	for _, name := range referenced {
		if _, ok := contract.Metrics[name]; !ok {
			t.Errorf("the dashboard shows %q, which no function emits", name)
		}
	}
}

// TestEveryResourceTagged: application and prefix tags on every resource
// that takes tags.
func TestEveryResourceTagged(t *testing.T) {
	props := testProps()
	props.Prefix = "acme-dev"
	s := synth(t, props)
	taggable := map[string]bool{}
	for _, typ := range []string{"AWS::DynamoDB::Table", "AWS::SQS::Queue", "AWS::Lambda::Function", "AWS::IAM::Role",
		"AWS::Logs::LogGroup", "AWS::SecretsManager::Secret", "AWS::SNS::Topic", "AWS::Events::EventBus", "AWS::CloudWatch::Alarm",
		"AWS::Lambda::EventSourceMapping"} {
		taggable[typ] = true
	}
	resources := s.raw["Resources"].(map[string]any)
	for id, r := range resources {
		rm := r.(map[string]any)
		typ := rm["Type"].(string)
		p, _ := rm["Properties"].(map[string]any)
		tags, has := p["Tags"]
		if !has {
			if taggable[typ] {
				t.Errorf("%s (%s) has no tags", id, typ)
			}
			continue
		}
		got := map[string]any{}
		for _, tag := range asList(tags) {
			m := tag.(map[string]any)
			got[fmt.Sprint(m["Key"])] = m["Value"]
		}
		if len(got) == 0 { // a map of tags (e.g. some resource types)
			if tm, ok := tags.(map[string]any); ok {
				got = tm
			}
		}
		if got[TagApplication] != "localeflow" || got[TagPrefix] != "acme-dev" {
			t.Errorf("%s (%s) tags %v", id, typ, tags)
		}
	}
}

func TestFunctionsLogJSONAndCapConcurrency(t *testing.T) {
	props := testProps()
	props.Functions = map[string]FunctionOptions{"poller": {MaxConcurrency: 3}}
	s := synth(t, props)
	for _, fn := range s.topo.Functions {
		lc, _ := s.props(t, "AWS::Lambda::Function", fn.Logical)["LoggingConfig"].(map[string]any)
		if lc["LogFormat"] != "JSON" {
			t.Errorf("%s logging config %v", fn.Dir, lc)
		}
	}
	s.has(t, "AWS::Lambda::EventSourceMapping", map[string]any{
		"FunctionName":  ref(s.logicalID(t, "AWS::Lambda::Function", s.topo.Functions[0].Logical)),
		"ScalingConfig": map[string]any{"MaximumConcurrency": 3},
	})
	maps := s.resources("AWS::Lambda::EventSourceMapping")
	if len(maps) != 2 {
		t.Fatalf("%d event source mappings", len(maps))
	}
	for id, r := range maps {
		sc, _ := r["Properties"].(map[string]any)["ScalingConfig"].(map[string]any)
		if sc["MaximumConcurrency"] == nil {
			t.Errorf("%s has no maximum concurrency", id)
		}
	}
	for _, bad := range []int{1, 1001} {
		props := testProps()
		props.Functions = map[string]FunctionOptions{"coordinator": {MaxConcurrency: bad}}
		if _, err := resolve(props); err == nil || !strings.Contains(err.Error(), "maxConcurrency") {
			t.Errorf("maxConcurrency %d: %v", bad, err)
		}
	}
}

func TestPrefixNamesEveryResource(t *testing.T) {
	props := testProps()
	props.Prefix = "acme-dev"
	s := synth(t, props)
	named := map[string]string{
		"AWS::DynamoDB::Table":        "TableName",
		"AWS::SQS::Queue":             "QueueName",
		"AWS::Lambda::Function":       "FunctionName",
		"AWS::Events::Rule":           "Name",
		"AWS::Events::EventBus":       "Name",
		"AWS::SecretsManager::Secret": "Name",
		"AWS::CloudWatch::Alarm":      "AlarmName",
		"AWS::Logs::LogGroup":         "LogGroupName",
	}
	for typ, field := range named {
		for id, r := range s.resources(typ) {
			name := fmt.Sprint(r["Properties"].(map[string]any)[field])
			if !strings.HasPrefix(strings.TrimPrefix(name, "/aws/lambda/"), "acme-dev") {
				t.Errorf("%s %s = %q, not under the prefix", typ, id, name)
			}
		}
	}
}

func TestStackIsEnvironmentAgnostic(t *testing.T) {
	s := defaultSynth(t)
	if env := *s.stack.Environment(); env != "aws://unknown-account/unknown-region" {
		t.Errorf("environment %s: synth must need no lookups", env)
	}
}

func TestInvalidPropsRejected(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Props)
		want   string
	}{
		{"bad prefix", func(p *Props) { p.Prefix = "Bad_Prefix" }, "prefix"},
		{"missing asset dir", func(p *Props) { p.AssetDir = "" }, "AssetDir is required"},
		{"missing bootstrap", func(p *Props) { p.AssetDir = t.TempDir() }, "make build"},
		{"missing CMS URL", func(p *Props) { p.CMSBaseURL = "" }, "CMSBaseURL is required"},
		{"relative evidence URL", func(p *Props) { p.EvidenceBaseURL = "evidence.local" }, "EvidenceBaseURL"},
		{"plain http CMS URL", func(p *Props) { p.CMSBaseURL = "http://cms.example.com" }, "CMSBaseURL"},
		{"plain http evidence URL", func(p *Props) { p.EvidenceBaseURL = "http://evidence.example.com" }, "EvidenceBaseURL"},
		{"URL with credentials", func(p *Props) { p.CMSBaseURL = "https://u:p@cms.example.com" }, "CMSBaseURL"},
		{"URL with query", func(p *Props) { p.CMSBaseURL = "https://cms.example.com/?k=v" }, "CMSBaseURL"},
		{"ftp URL", func(p *Props) { p.CMSBaseURL = "ftp://cms.example.com" }, "CMSBaseURL"},
		{"unknown function", func(p *Props) { p.Functions = map[string]FunctionOptions{"pollr": {MemoryMB: 512}} }, "unknown function"},
		{"timeout over 900", func(p *Props) {
			p.Functions = map[string]FunctionOptions{"poller": {TimeoutSeconds: 901}}
		}, "timeout"},
		{"negative timeout", func(p *Props) {
			p.Functions = map[string]FunctionOptions{"health": {TimeoutSeconds: -1}}
		}, "timeout"},
		{"memory too small", func(p *Props) { p.Functions = map[string]FunctionOptions{"coordinator": {MemoryMB: 64}} }, "memory"},
		{"negative reserved", func(p *Props) {
			p.Functions = map[string]FunctionOptions{"coordinator": {ReservedConcurrency: -1}}
		}, "reserved"},
		{"issuer key too short", func(p *Props) { p.ReceiptIssuers.Quality = "qa=abcd" }, "ReceiptIssuers.Quality"},
		{"issuer key uppercase", func(p *Props) { p.ReceiptIssuers.HumanReview = "qa=" + strings.ToUpper(humanKey) }, "ReceiptIssuers.HumanReview"},
		{"issuer without key", func(p *Props) { p.ReceiptIssuers.IndependentReview = "qa" }, "ReceiptIssuers.IndependentReview"},
		{"issuer bad name", func(p *Props) { p.ReceiptIssuers.Quality = "q a=" + issuerKey }, "ReceiptIssuers.Quality"},
		{"issuer repeated", func(p *Props) { p.ReceiptIssuers.Quality = "qa=" + issuerKey + ",qa=" + issuerKey }, "repeats"},
		{"human review issuers missing", func(p *Props) { p.ReceiptIssuers.HumanReview = "" }, "ReceiptIssuers.HumanReview is required"},
		{"quality key trusted for human review", func(p *Props) { p.ReceiptIssuers.HumanReview = "desk=" + issuerKey }, "share a key"},
		{"human key trusted for independent review", func(p *Props) {
			p.ReceiptIssuers.IndependentReview = "rv=" + humanKey
		}, "share a key"},
		{"retention below the event max age", func(p *Props) { p.MonitorRetention = 168 * 3600e9 }, "max age"},
		{"sweep grace over 900s", func(p *Props) { p.SweepGrace = 901 * time.Second }, "lifecycle_monitor.delay_invalid"},
		{"sweep grace negative", func(p *Props) { p.SweepGrace = -time.Second }, "SweepGrace -1s"},
		{"sweep grace sub-millisecond", func(p *Props) { p.SweepGrace = 1500 * time.Microsecond }, "lifecycle_monitor.delay_invalid"},
		{"bad alarm topic", func(p *Props) { p.AlarmTopicArn = "arn:aws:sqs:eu-west-1:1:q" }, "SNS"},
		{"bad alarm e-mail", func(p *Props) { p.AlarmEmail = "not-an-address" }, "AlarmEmail"},
		{"alarm e-mail with a topic ARN", func(p *Props) {
			p.AlarmEmail, p.AlarmTopicArn = "ops@example.com", "arn:aws:sns:eu-west-1:123456789012:ops"
		}, "AlarmEmail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			props := testProps()
			tt.mutate(props)
			_, err := resolve(props)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
	if _, err := resolve(nil); err == nil {
		t.Error("nil props accepted")
	}
	for _, id := range []string{"", "1stack", "my_stack", "a/b"} {
		if _, err := NewStack(awscdk.NewApp(nil), id, &StackProps{Props: *testProps()}); err == nil || !strings.Contains(err.Error(), "stack name") {
			t.Errorf("stack id %q: err = %v", id, err)
		}
	}
}

// TestSweepGraceReachesThePoller: the SweepGrace prop is set on the poller
// alone, as the variable its config loader reads; the default is 30s
// (TestFunctionEnvironment). The upper bound itself is accepted.
func TestSweepGraceReachesThePoller(t *testing.T) {
	for grace, want := range map[time.Duration]string{2 * time.Minute: "2m0s", 900 * time.Second: "15m0s", 1500 * time.Millisecond: "1.5s"} {
		props := testProps()
		props.SweepGrace = grace
		s := synth(t, props)
		for _, fn := range s.topo.Functions {
			env := s.props(t, "AWS::Lambda::Function", fn.Logical)["Environment"].(map[string]any)["Variables"].(map[string]any)
			v, ok := env[EnvSweepGrace]
			if set := fn.Dir == "poller"; ok != set || (set && v != want) {
				t.Errorf("%s: %s = %v (set %v), want %q", fn.Dir, EnvSweepGrace, v, ok, want)
			}
		}
	}
}

// TestReceiptIssuersUnsetLeavesVariableOut: a SynthOnly template without
// issuers leaves the variables unset (New without SynthOnly refuses it,
// TestNewRefusesPropsWithoutReceiptIssuers).
func TestReceiptIssuersUnsetLeavesVariableOut(t *testing.T) {
	props := testProps()
	props.ReceiptIssuers = ReceiptIssuers{}
	props.SynthOnly = true
	s := synth(t, props)
	env := s.props(t, "AWS::Lambda::Function", "CoordinatorFunction")["Environment"].(map[string]any)["Variables"].(map[string]any)
	for _, name := range []string{EnvReceiptIssuersQuality, EnvReceiptIssuersHumanReview, EnvReceiptIssuersIndependentReview, contract.EnvReceiptIssuersRetired} {
		if v, ok := env[name]; ok {
			t.Errorf("%s = %v without issuers", name, v)
		}
	}
}

// TestQuarantineQueueAndRejectedAlarm: rejected messages were acknowledged
// with a log line only; the stack now has a quarantine queue (encrypted,
// TLS only, 14 days), both consumers may send to it and get its URL, and
// each consumer's MessagesRejected metric raises an alarm.
func TestQuarantineQueueAndRejectedAlarm(t *testing.T) {
	s := defaultSynth(t)
	q := s.props(t, "AWS::SQS::Queue", s.topo.Quarantine.Logical)
	if q["QueueName"] != s.topo.Quarantine.Name || q["KmsMasterKeyId"] == nil ||
		!jsonEqual(q["MessageRetentionPeriod"], s.topo.Quarantine.RetentionSeconds) || q["RedrivePolicy"] != nil {
		t.Fatalf("quarantine queue %v", q)
	}
	qid := s.logicalID(t, "AWS::SQS::Queue", s.topo.Quarantine.Logical)
	for _, fn := range s.topo.Functions {
		if fn.Queue == "" {
			continue
		}
		env := s.props(t, "AWS::Lambda::Function", fn.Logical)["Environment"].(map[string]any)["Variables"].(map[string]any)
		if !jsonEqual(env[EnvQuarantineQueueURL], ref(qid)) {
			t.Errorf("%s: %s = %v", fn.Dir, EnvQuarantineQueueURL, env[EnvQuarantineQueueURL])
		}
		// Issue 25 finding 7: a key secret that could not be re-read was
		// kept silently.
		s.has(t, "AWS::CloudWatch::Alarm", map[string]any{
			"AlarmName":          fn.Name + "-key-reload-failed",
			"Namespace":          HealthMetricNamespace,
			"MetricName":         KeyReloadFailuresMetricName,
			"Dimensions":         assertions.Match_ArrayWith(&[]any{deploymentDim, map[string]any{"Name": "Function", "Value": fn.Dir}}),
			"Statistic":          "Sum",
			"ComparisonOperator": "GreaterThanThreshold",
			"Threshold":          0,
		})
		s.has(t, "AWS::CloudWatch::Alarm", map[string]any{
			"AlarmName":          fn.Name + "-messages-rejected",
			"Namespace":          QuarantineMetricNamespace,
			"MetricName":         MessagesRejectedMetricName,
			"Dimensions":         assertions.Match_ArrayWith(&[]any{deploymentDim, map[string]any{"Name": "Function", "Value": fn.Dir}}),
			"Statistic":          "Sum",
			"ComparisonOperator": "GreaterThanThreshold",
			"Threshold":          0,
		})
	}
}
