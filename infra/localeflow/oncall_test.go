package localeflow

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/monitor"
)

// TestRuleTargetsHaveDLQAndRetryPolicy: the rule targets had no dead-letter
// queue and no retry policy, so an event EventBridge could not deliver
// (e.g. to the key-encrypted release queue after a key-policy mistake) was
// dropped after 24 h without a trace. Every target of every rule and
// schedule now sends to the event DLQ after its retry policy.
func TestRuleTargetsHaveDLQAndRetryPolicy(t *testing.T) {
	s := defaultSynth(t)
	dlq := getAtt(s.logicalID(t, "AWS::SQS::Queue", "EventTargetDLQ"), "Arn")
	check := func(logical string, wantAge, wantAttempts int) {
		t.Run(logical, func(t *testing.T) {
			targets := asList(s.props(t, "AWS::Events::Rule", logical)["Targets"])
			if len(targets) != 1 {
				t.Fatalf("targets = %v", targets)
			}
			tg := targets[0].(map[string]any)
			if !jsonEqual(tg["DeadLetterConfig"], map[string]any{"Arn": dlq}) {
				t.Errorf("dead-letter config = %v", tg["DeadLetterConfig"])
			}
			want := map[string]any{"MaximumEventAgeInSeconds": wantAge, "MaximumRetryAttempts": wantAttempts}
			if !jsonEqual(tg["RetryPolicy"], want) {
				t.Errorf("retry policy = %v, want %v", tg["RetryPolicy"], want)
			}
		})
	}
	for _, r := range s.topo.Rules {
		check(r.Logical, s.topo.EventDLQ.MaxEventAgeSeconds, s.topo.EventDLQ.RetryAttempts)
	}
	for _, sch := range s.topo.Schedules {
		check(sch.Logical, sch.RateMinutes*60, 2)
	}
	if s.topo.EventDLQ.MaxEventAgeSeconds != 3600 || s.topo.EventDLQ.RetryAttempts != 185 {
		t.Errorf("input retry policy %+v, docs/design.md says 1 h / 185", s.topo.EventDLQ)
	}
}

// TestEventDLQ: SQS-managed encryption even when the data key is on (a DLQ
// under the data key would refuse the events the key refused), TLS only,
// 14 days, and only this stack's rules may send to it.
func TestEventDLQ(t *testing.T) {
	s := defaultSynth(t)
	id := s.logicalID(t, "AWS::SQS::Queue", "EventTargetDLQ")
	p := s.props(t, "AWS::SQS::Queue", "EventTargetDLQ")
	if p["QueueName"] != s.topo.EventDLQ.Name || p["MessageRetentionPeriod"] != float64(14*24*3600) ||
		p["SqsManagedSseEnabled"] != true || p["KmsMasterKeyId"] != nil {
		t.Errorf("event DLQ = %v", p)
	}
	senders := map[string]bool{}
	for _, r := range s.resources("AWS::SQS::QueuePolicy") {
		statements(r["Properties"], func(_ string, st map[string]any) {
			if st["Effect"] == "Allow" && jsonEqual(st["Resource"], getAtt(id, "Arn")) {
				if !jsonEqual(st["Principal"], map[string]any{"Service": "events.amazonaws.com"}) || fmt.Sprint(st["Action"]) != "sqs:SendMessage" {
					t.Errorf("statement %v", st)
				}
				senders[fmt.Sprint(st["Condition"])] = true
			}
		})
	}
	for _, r := range append(slices.Clone(ruleLogicals(s)), scheduleLogicals(s)...) {
		ruleID := s.logicalID(t, "AWS::Events::Rule", r)
		found := false
		for cond := range senders {
			found = found || strings.Contains(cond, ruleID)
		}
		if !found {
			t.Errorf("rule %s may not send to the event DLQ: %v", r, senders)
		}
	}
}

func ruleLogicals(s synthesized) []string {
	var out []string
	for _, r := range s.topo.Rules {
		out = append(out, r.Logical)
	}
	return out
}

func scheduleLogicals(s synthesized) []string {
	var out []string
	for _, r := range s.topo.Schedules {
		out = append(out, r.Logical)
	}
	return out
}

// TestUndeliveredEventAlarms: FailedInvocations per rule and schedule and
// the event DLQ's depth page.
func TestUndeliveredEventAlarms(t *testing.T) {
	s := defaultSynth(t)
	for _, r := range s.topo.Rules {
		s.has(t, "AWS::CloudWatch::Alarm", map[string]any{
			"AlarmName": r.Name + "-failed-invocations", "Namespace": "AWS/Events", "MetricName": "FailedInvocations",
			"Dimensions": []any{
				map[string]any{"Name": "EventBusName", "Value": s.topo.BusName},
				map[string]any{"Name": "RuleName", "Value": r.Name},
			},
			"Statistic": "Sum", "ComparisonOperator": "GreaterThanThreshold", "Threshold": 0, "TreatMissingData": "notBreaching",
		})
	}
	for _, sch := range s.topo.Schedules {
		s.has(t, "AWS::CloudWatch::Alarm", map[string]any{
			"AlarmName": sch.Name + "-failed-invocations", "Namespace": "AWS/Events", "MetricName": "FailedInvocations",
			"Dimensions": []any{map[string]any{"Name": "RuleName", "Value": sch.Name}},
			"Statistic":  "Sum", "ComparisonOperator": "GreaterThanThreshold", "Threshold": 0,
		})
	}
	s.has(t, "AWS::CloudWatch::Alarm", map[string]any{
		"AlarmName": s.topo.EventDLQ.Name + "-depth", "Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
		"Dimensions":         []any{map[string]any{"Name": "QueueName", "Value": getAtt(s.logicalID(t, "AWS::SQS::Queue", "EventTargetDLQ"), "QueueName")}},
		"ComparisonOperator": "GreaterThanThreshold", "Threshold": 0,
	})
}

// TestBusArchive: the input events are archived (for localeflow replay)
// with the documented retention.
func TestBusArchive(t *testing.T) {
	s := defaultSynth(t)
	p := s.props(t, "AWS::Events::Archive", "EventArchive")
	want := map[string]any{"source": []any{contract.EventSource}, "detail-type": s.topo.InputDetailTypes()}
	if p["ArchiveName"] != s.topo.Archive.Name || p["RetentionDays"] != float64(7) ||
		!jsonEqual(p["SourceArn"], getAtt(s.logicalID(t, "AWS::Events::EventBus", "EventBus"), "Arn")) ||
		!jsonEqual(p["EventPattern"], want) {
		t.Errorf("archive = %v", p)
	}
	if len(s.topo.Archive.Name) > 48 || len(fmt.Sprintf("%s-archive", strings.Repeat("p", 40))) > 48 {
		t.Errorf("archive name %q can exceed 48 characters", s.topo.Archive.Name)
	}
}

// TestOldestDueAlarm: OldestDueSeconds had no alarm. Its threshold is the
// poll interval plus the CMS outage tolerance of the synthesized settings
// (the unjittered sum of the backoffs: the longest the schedule can span).
func TestOldestDueAlarm(t *testing.T) {
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{
		{0, 105 * time.Second}, // 30 s + 5+10+20+40 s
		{8, monitor.DefaultPollInterval + monitor.OutageTolerance(monitor.Config{MaxConsecutiveFailures: 8}.WithDefaults())},
	} {
		props := testProps()
		props.MaxConsecutiveFailures = tc.failures
		s := synth(t, props)
		s.has(t, "AWS::CloudWatch::Alarm", map[string]any{
			"AlarmName": "localeflow-oldest-due", "Namespace": HealthMetricNamespace, "MetricName": contract.MetricOldestDueSeconds,
			"Dimensions": []any{deploymentDim}, "Statistic": "Maximum", "ComparisonOperator": "GreaterThanThreshold",
			"Threshold": float64(tc.want / time.Second), "TreatMissingData": "notBreaching",
		})
	}
}

// TestHealthHeartbeatAlarmShape: the health alarm had one 5-minute period
// and treated missing data as breaching, so one check that drifted across
// a period boundary paged. Blocked now pages on its own (missing data not
// breaching); a separate heartbeat alarm counts the reports and pages only
// when 2 of the last 3 periods had none.
func TestHealthHeartbeatAlarmShape(t *testing.T) {
	s := defaultSynth(t)
	s.has(t, "AWS::CloudWatch::Alarm", map[string]any{
		"AlarmName": "localeflow-health-blocked", "MetricName": contract.MetricHealthBlockedOperations, "Statistic": "Maximum",
		"EvaluationPeriods": 1, "TreatMissingData": "notBreaching",
	})
	s.has(t, "AWS::CloudWatch::Alarm", map[string]any{
		"AlarmName": "localeflow-health-heartbeat", "Namespace": HealthMetricNamespace, "MetricName": HealthBlockedMetricName,
		"Dimensions": []any{deploymentDim}, "Statistic": "SampleCount", "Period": 300,
		"ComparisonOperator": "LessThanThreshold", "Threshold": 1,
		"EvaluationPeriods": 3, "DatapointsToAlarm": 2, "TreatMissingData": "breaching",
	})
	var healthRate int
	for _, sch := range s.topo.Schedules {
		if sch.Function == "health" {
			healthRate = sch.RateMinutes
		}
	}
	// One late check empties at most one period, and then only when the
	// period is the schedule's rate: 2 empty periods need 2 missed checks.
	if healthRate != alarmPeriodMinutes || heartbeatDatapointsToAlarm < 2 {
		t.Errorf("health rate %d min, period %d min, %d of %d", healthRate, alarmPeriodMinutes, heartbeatDatapointsToAlarm, heartbeatEvaluationPeriods)
	}
}

// TestQueryDefinitions: the saved Logs Insights queries of the common
// on-call questions, on this deployment's log groups.
func TestQueryDefinitions(t *testing.T) {
	s := defaultSynth(t)
	s.count(t, "AWS::Logs::QueryDefinition", 3)
	for _, q := range []struct {
		logical, name string
		groups        []any
		contains      []string
	}{
		{"ChangeHistoryQuery", "localeflow/change-history", []any{"/aws/lambda/localeflow-poller", "/aws/lambda/localeflow-coordinator"}, []string{"event_id = ", "sort @timestamp asc"}},
		{"FailuresByCodeQuery", "localeflow/failures-by-code", []any{"/aws/lambda/localeflow-poller", "/aws/lambda/localeflow-coordinator", "/aws/lambda/localeflow-health"}, []string{"stats count(*)", "by code"}},
		{"SlowestCMSCallsQuery", "localeflow/slowest-cms-calls", []any{"/aws/lambda/localeflow-poller", "/aws/lambda/localeflow-coordinator"}, []string{`msg = "` + contract.LogRemoteCalls + `"`, "sort slowest_remote_ms desc", "slowest_request_id"}},
	} {
		p := s.props(t, "AWS::Logs::QueryDefinition", q.logical)
		if p["Name"] != q.name || !jsonEqual(p["LogGroupNames"], q.groups) {
			t.Errorf("%s = %v", q.logical, p)
		}
		for _, c := range q.contains {
			if !strings.Contains(fmt.Sprint(p["QueryString"]), c) {
				t.Errorf("%s query lacks %q: %v", q.logical, c, p["QueryString"])
			}
		}
	}
}

var runbookAnchor = regexp.MustCompile(` Runbook: docs/runbook\.md#([a-z0-9-]+)$`)

// runbookSections reads the "## " headings of docs/runbook.md as GitHub
// anchors, each with its text.
func readRunbook(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../../" + RunbookPath)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	var current string
	for _, line := range strings.Split(string(raw), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			current = anchorOf(h)
			sections[current] = ""
			continue
		}
		if current != "" {
			sections[current] += line + "\n"
		}
	}
	return sections
}

// anchorOf is GitHub's anchor of a heading: lowercase, spaces to dashes,
// punctuation other than dashes dropped.
func anchorOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestEveryAlarmHasARunbookSection: alarm descriptions were one-liners
// without a procedure. Every alarm's description now ends with the
// docs/runbook.md section that says what it means, how to confirm it, how
// to fix it and how to close it; an alarm without one fails here.
func TestEveryAlarmHasARunbookSection(t *testing.T) {
	s := defaultSynth(t)
	sections := readRunbook(t)
	used := map[string]bool{}
	for id, r := range s.resources("AWS::CloudWatch::Alarm") {
		desc := fmt.Sprint(r["Properties"].(map[string]any)["AlarmDescription"])
		m := runbookAnchor.FindStringSubmatch(desc)
		if m == nil {
			t.Errorf("alarm %s names no runbook section: %q", id, desc)
			continue
		}
		body, ok := sections[m[1]]
		if !ok {
			t.Errorf("alarm %s names section #%s, which docs/runbook.md does not have", id, m[1])
			continue
		}
		used[m[1]] = true
		for _, part := range []string{"**Meaning.**", "**Confirm.**", "**Fix.**", "**Close.**"} {
			if !strings.Contains(body, part) {
				t.Errorf("runbook section #%s has no %s part", m[1], part)
			}
		}
	}
	for _, rs := range runbookSections {
		if !used[rs.anchor] {
			t.Errorf("runbook section #%s is mapped but no alarm uses it", rs.anchor)
		}
	}
	// The alarms of issue 38, each with its section.
	for _, anchor := range []string{"quarantine-depth", "quarantine-age", "health-business-outcome", "oldest-open-change",
		"oldest-open-release", "records-expiring-unfinished", "function-near-timeout", "table-throttles", "table-system-errors", "schedule-stopped"} {
		if !used[anchor] {
			t.Errorf("no alarm names the new section #%s", anchor)
		}
	}
	// The data key's state rule is not an alarm but has its section too.
	if _, ok := sections["data-key-state"]; !ok {
		t.Error("docs/runbook.md has no section #data-key-state")
	}
}

// TestFunctionsTraceActively: no function had a TracingConfig, so no trace
// existed to correlate with the CMS's. Every function now traces actively.
func TestFunctionsTraceActively(t *testing.T) {
	s := defaultSynth(t)
	for _, fn := range s.topo.Functions {
		if p := s.props(t, "AWS::Lambda::Function", fn.Logical); !jsonEqual(p["TracingConfig"], map[string]any{"Mode": "Active"}) {
			t.Errorf("%s tracing %v", fn.Logical, p["TracingConfig"])
		}
	}
}

// TestLatencyOnDashboard: no latency metric existed for the CMS and
// evidence calls. The dashboard shows each kind's p50 and p99.
func TestLatencyOnDashboard(t *testing.T) {
	s := defaultSynth(t)
	body := joinedStrings(s.props(t, "AWS::CloudWatch::Dashboard", "Dashboard")["DashboardBody"])
	for _, name := range []string{contract.MetricCMSLifecycleLatency, contract.MetricCMSDeliveryLatency, contract.MetricEvidenceLatency} {
		for _, stat := range []string{"p50", "p99"} {
			if !regexp.MustCompile(`\["Localeflow","` + name + `","Deployment","localeflow",\{[^}]*"stat":"` + stat + `"`).MatchString(body) {
				t.Errorf("no %s of %s on the dashboard", stat, name)
			}
		}
	}
}

// expectedAlarm is what one alarm must be: its metric (namespace and
// name, or "math" for a metric-math alarm over the listed metric names),
// statistic and period, threshold and comparison, evaluation (periods,
// datapoints, missing data) and destination topic (construct id).
type expectedAlarm struct {
	namespace, metric, statistic string
	period                       int
	threshold                    float64
	op                           string
	periods, datapoints          int
	missing                      string
	topic                        string
	math                         []string
}

// alarmCatalogue is every alarm of s by name, computed from the topology
// and the documented rules (not from the builder's helpers).
func alarmCatalogue(t *testing.T, s synthesized) map[string]expectedAlarm {
	t.Helper()
	gt, ge, lt := "GreaterThanThreshold", "GreaterThanOrEqualToThreshold", "LessThanThreshold"
	page, ticket := "AlarmTopic", "TicketTopic"
	quiet := "notBreaching"
	one := func(ns, metric, stat string, period int, threshold float64, op, topic string) expectedAlarm {
		return expectedAlarm{namespace: ns, metric: metric, statistic: stat, period: period, threshold: threshold, op: op,
			periods: 1, datapoints: 1, missing: quiet, topic: topic}
	}
	topo := s.topo
	c := map[string]expectedAlarm{}
	for _, q := range topo.Queues() {
		c[q.DLQName+"-depth"] = one("AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum", 60, 0, gt, page)
		c[q.Name+"-oldest-message"] = one("AWS/SQS", "ApproximateAgeOfOldestMessage", "Maximum", 300, 3600, gt, page)
	}
	p := topo.Prefix
	c[p+"-health-blocked"] = one(HealthMetricNamespace, contract.MetricHealthBlockedOperations, "Maximum", 300, 1, ge, page)
	c[p+"-health-business-outcome"] = one(HealthMetricNamespace, contract.MetricHealthBlockedBusiness, "Maximum", 300, 1, ge, ticket)
	c[p+"-oldest-open-change"] = one(HealthMetricNamespace, contract.MetricOldestOpenChangeSeconds, "Maximum", 300, 14*24*3600, gt, ticket)
	c[p+"-oldest-open-release"] = one(HealthMetricNamespace, contract.MetricOldestOpenReleaseSeconds, "Maximum", 300, 7*24*3600, gt, ticket)
	c[p+"-records-expiring-unfinished"] = one(HealthMetricNamespace, contract.MetricRecordsExpiringUnfinished, "Maximum", 300, 0, gt, ticket)
	for _, fn := range topo.Functions {
		if fn.Queue != "" {
			c[fn.Name+"-messages-rejected"] = one(HealthMetricNamespace, contract.MetricMessagesRejected, "Sum", 300, 0, gt, ticket)
			c[fn.Name+"-key-reload-failed"] = one(HealthMetricNamespace, contract.MetricKeyReloadFailures, "Sum", 300, 0, gt, page)
		}
		errs := one("AWS/Lambda", "Errors", "Sum", 60, 0, gt, page)
		errs.periods, errs.datapoints = 5, 3
		c[fn.Name+"-errors"] = errs
		c[fn.Name+"-throttles"] = one("AWS/Lambda", "Throttles", "Sum", 300, 0, gt, ticket)
		c[fn.Name+"-near-timeout"] = one("AWS/Lambda", "Duration", "Maximum", 300, float64(fn.TimeoutSeconds)*900, gt, ticket)
	}
	for _, tb := range topo.Tables() {
		// Read and write throttles of the table and of each index.
		var names []string
		for range 1 + len(tb.Indexes) {
			names = append(names, "ReadThrottleEvents", "WriteThrottleEvents")
		}
		c[tb.Name+"-throttles"] = expectedAlarm{math: names, threshold: 0, op: gt, periods: 1, datapoints: 1, missing: quiet, topic: ticket}
		ops := []string{"SystemErrors", "SystemErrors", "SystemErrors", "SystemErrors", "SystemErrors", "SystemErrors"}
		c[tb.Name+"-system-errors"] = expectedAlarm{math: ops, threshold: 0, op: gt, periods: 3, datapoints: 2, missing: quiet, topic: ticket}
	}
	for _, r := range topo.Rules {
		c[r.Name+"-failed-invocations"] = one("AWS/Events", "FailedInvocations", "Sum", 300, 0, gt, page)
	}
	for _, sch := range topo.Schedules {
		c[sch.Name+"-failed-invocations"] = one("AWS/Events", "FailedInvocations", "Sum", 300, 0, gt, page)
		stopped := one("AWS/Events", "Invocations", "SampleCount", 300, 1, lt, ticket)
		stopped.periods, stopped.datapoints, stopped.missing = 3, 3, "breaching"
		c[sch.Name+"-stopped"] = stopped
	}
	c[topo.EventDLQ.Name+"-depth"] = one("AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum", 60, 0, gt, page)
	qd := one("AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum", 60, 0, gt, ticket)
	qd.missing = "ignore"
	c[topo.Quarantine.Name+"-depth"] = qd
	qa := one("AWS/SQS", "ApproximateAgeOfOldestMessage", "Maximum", 300, 10*24*3600, gt, page)
	qa.missing = "ignore"
	c[topo.Quarantine.Name+"-age"] = qa
	c[p+"-oldest-due"] = one(HealthMetricNamespace, contract.MetricOldestDueSeconds, "Maximum", 300, 105, gt, page)
	hb := one(HealthMetricNamespace, contract.MetricHealthBlocked, "SampleCount", 300, 1, lt, page)
	hb.periods, hb.datapoints, hb.missing = 3, 2, "breaching"
	c[p+"-health-heartbeat"] = hb
	return c
}

// TestAlarmCatalogue: every alarm of the default template, and no other,
// with its metric, threshold, evaluation and destination. Pages go to the
// page topic, tickets to the ticket topic; no OK actions by default (an
// incident is one message); errors page on 3 of 5 minutes, throttles and
// business outcomes are tickets; the quarantine's depth ignores missing
// data so it stays in ALARM while messages remain.
func TestAlarmCatalogue(t *testing.T) {
	s := defaultSynth(t)
	want := alarmCatalogue(t, s)
	topics := map[string]any{
		"AlarmTopic":  ref(s.logicalID(t, "AWS::SNS::Topic", "AlarmTopic")),
		"TicketTopic": ref(s.logicalID(t, "AWS::SNS::Topic", "TicketTopic")),
	}
	seen := map[string]bool{}
	for id, r := range s.resources("AWS::CloudWatch::Alarm") {
		p := r["Properties"].(map[string]any)
		name := fmt.Sprint(p["AlarmName"])
		seen[name] = true
		w, ok := want[name]
		if !ok {
			t.Errorf("alarm %s (%s) is not in the catalogue", name, id)
			continue
		}
		t.Run(name, func(t *testing.T) {
			if len(w.math) > 0 {
				var got []string
				for _, m := range asList(p["Metrics"]) {
					if stat, ok := m.(map[string]any)["MetricStat"].(map[string]any); ok {
						got = append(got, fmt.Sprint(stat["Metric"].(map[string]any)["MetricName"]))
						if stat["Metric"].(map[string]any)["Namespace"] != "AWS/DynamoDB" || stat["Stat"] != "Sum" || stat["Period"] != float64(300) {
							t.Errorf("metric %v", m)
						}
					}
				}
				slices.Sort(got)
				ws := slices.Sorted(slices.Values(w.math))
				if !slices.Equal(got, ws) {
					t.Errorf("math metrics %v, want %v", got, ws)
				}
			} else if p["Namespace"] != w.namespace || p["MetricName"] != w.metric || p["Statistic"] != w.statistic || p["Period"] != float64(w.period) {
				t.Errorf("metric %v/%v %v %v, want %s/%s %s %d", p["Namespace"], p["MetricName"], p["Statistic"], p["Period"], w.namespace, w.metric, w.statistic, w.period)
			}
			if p["Threshold"] != w.threshold || p["ComparisonOperator"] != w.op {
				t.Errorf("threshold %v %v, want %s %v", p["ComparisonOperator"], p["Threshold"], w.op, w.threshold)
			}
			if p["EvaluationPeriods"] != float64(w.periods) || p["DatapointsToAlarm"] != float64(w.datapoints) || p["TreatMissingData"] != w.missing {
				t.Errorf("evaluation %v of %v, missing %v; want %d of %d, %s", p["DatapointsToAlarm"], p["EvaluationPeriods"], p["TreatMissingData"], w.datapoints, w.periods, w.missing)
			}
			if !jsonEqual(p["AlarmActions"], []any{topics[w.topic]}) || p["OKActions"] != nil {
				t.Errorf("actions %v / OK %v, want %s only", p["AlarmActions"], p["OKActions"], w.topic)
			}
			sev := "[page] "
			if w.topic == "TicketTopic" {
				sev = "[ticket] "
			}
			if !strings.HasPrefix(fmt.Sprint(p["AlarmDescription"]), sev) {
				t.Errorf("description %q does not start with %q", p["AlarmDescription"], sev)
			}
		})
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("alarm %s is missing", name)
		}
	}
}

// TestSeverityProps: OKNotifications adds OK actions to the same topic;
// PageOnBusinessOutcomes sends the business alarm to the page topic;
// TicketTopicArn replaces the ticket topic; RunbookURL replaces the link.
func TestSeverityProps(t *testing.T) {
	props := testProps()
	props.OKNotifications, props.PageOnBusinessOutcomes = true, true
	props.TicketTopicArn = "arn:aws:sns:eu-west-1:111122223333:team-tickets"
	props.RunbookURL = "https://wiki.example.com/localeflow/runbook"
	s := synth(t, props)
	s.count(t, "AWS::SNS::Topic", 1)
	page := ref(s.logicalID(t, "AWS::SNS::Topic", "AlarmTopic"))
	for _, r := range s.resources("AWS::CloudWatch::Alarm") {
		p := r["Properties"].(map[string]any)
		name := fmt.Sprint(p["AlarmName"])
		if !jsonEqual(p["OKActions"], p["AlarmActions"]) {
			t.Errorf("%s: OK %v, alarm %v", name, p["OKActions"], p["AlarmActions"])
		}
		if name == "localeflow-health-business-outcome" && !jsonEqual(p["AlarmActions"], []any{page}) {
			t.Errorf("business alarm not paged: %v", p["AlarmActions"])
		}
		if name == "localeflow-poller-throttles" && !jsonEqual(p["AlarmActions"], []any{props.TicketTopicArn}) {
			t.Errorf("throttles to %v", p["AlarmActions"])
		}
		if !regexp.MustCompile(` Runbook: https://wiki\.example\.com/localeflow/runbook#[a-z0-9-]+$`).MatchString(fmt.Sprint(p["AlarmDescription"])) {
			t.Errorf("%s description %q", name, p["AlarmDescription"])
		}
	}
	for _, bad := range []OncallProps{{RunbookURL: "http://wiki.example.com/rb"}, {RunbookURL: "https://wiki.example.com/rb#x"}, {TicketTopicArn: "tickets"}} {
		p := testProps()
		p.OncallProps = bad
		if _, err := New(awscdk.NewStack(awscdk.NewApp(nil), nil, nil), "LF", p); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestAgeAlarmsFollowTheHealthSettings: the age alarms' thresholds are the
// limits the health function's loader reads from the settings the stack
// gives it; a max change age not below the monitor retention is refused
// (the ticket must come before the release's records expire).
func TestAgeAlarmsFollowTheHealthSettings(t *testing.T) {
	props := testProps()
	props.SettingsEnv = map[string]string{contract.EnvHealthMaxChangeAge: "72h", contract.EnvHealthMaxReleaseAge: "36h"}
	s := synth(t, props)
	s.has(t, "AWS::CloudWatch::Alarm", map[string]any{"AlarmName": "localeflow-oldest-open-change", "Threshold": 72 * 3600})
	s.has(t, "AWS::CloudWatch::Alarm", map[string]any{"AlarmName": "localeflow-oldest-open-release", "Threshold": 36 * 3600})
	if env := s.functionEnv(t, "health"); env[contract.EnvHealthMaxChangeAge] != "72h" {
		t.Errorf("health env %v", env)
	}
	props = testProps()
	props.Settings.HealthMaxChangeAge = DefaultMonitorRetention
	_, err := New(awscdk.NewStack(awscdk.NewApp(nil), nil, nil), "LF", props)
	if err == nil || !strings.Contains(err.Error(), contract.EnvHealthMaxChangeAge) || !strings.Contains(err.Error(), "MonitorRetention") {
		t.Errorf("max change age = retention: %v", err)
	}
}

// TestDataKeyStateRule: KMS has no metric of a key's state; the CloudTrail
// events that take the data key out of service page through a rule on
// the default bus (none without the customer-managed key).
func TestDataKeyStateRule(t *testing.T) {
	s := defaultSynth(t)
	key := s.logicalID(t, "AWS::KMS::Key", "DataKey")
	p := s.props(t, "AWS::Events::Rule", "DataKeyStateRule")
	want := map[string]any{
		"source": []any{"aws.kms"}, "detail-type": []any{"AWS API Call via CloudTrail"},
		"detail": map[string]any{"eventSource": []any{"kms.amazonaws.com"}, "eventName": []any{"DisableKey", "ScheduleKeyDeletion"},
			"resources": map[string]any{"ARN": []any{getAtt(key, "Arn")}}},
	}
	if !jsonEqual(p["EventPattern"], want) || p["EventBusName"] != nil {
		t.Errorf("pattern %v", p["EventPattern"])
	}
	if targets := asList(p["Targets"]); len(targets) != 1 || !jsonEqual(targets[0].(map[string]any)["Arn"], ref(s.logicalID(t, "AWS::SNS::Topic", "AlarmTopic"))) {
		t.Errorf("targets %v", p["Targets"])
	}
	props := testProps()
	props.CustomerManagedKey = new(bool)
	if len(synth(t, props).resources("AWS::KMS::Key")) != 0 {
		t.Fatal("key without CustomerManagedKey")
	}
}

// TestOutageToleranceFollowsTheDeployedSettings (issue 37, finding 4): the
// outage tolerance, its stack output and the oldest-due alarm were
// computed from the default base delay and poll interval whatever the
// settings said (75 s for a policy that tolerates 15 s; "poll interval
// 30s" under a 10-minute interval). They now come from the poller's
// configuration as its loader reads the environment the stack gives it.
func TestOutageToleranceFollowsTheDeployedSettings(t *testing.T) {
	for name, set := range map[string]func(*Props){
		"typed settings": func(p *Props) { p.Settings.PollInterval, p.Settings.RetryBaseDelay = 10*time.Minute, time.Second },
		"raw settings": func(p *Props) {
			p.SettingsEnv = map[string]string{contract.EnvPollInterval: "10m", contract.EnvRetryBaseDelay: "1s"}
		},
		"per-function settings": func(p *Props) {
			p.Functions = map[string]FunctionOptions{"poller": {Settings: map[string]string{contract.EnvPollInterval: "10m", contract.EnvRetryBaseDelay: "1s"}}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			props := testProps()
			set(props)
			s := synth(t, props)
			// 1+2+4+8 s with 5 failures allowed.
			s.has(t, "AWS::CloudWatch::Alarm", map[string]any{"AlarmName": "localeflow-oldest-due", "Threshold": 600 + 15})
			desc := fmt.Sprint(s.props(t, "AWS::CloudWatch::Alarm", "OldestDueAlarm")["AlarmDescription"])
			if !strings.Contains(desc, "poll interval 10m0s") || !strings.Contains(desc, "outage tolerance 15s") {
				t.Errorf("description %q", desc)
			}
			out := s.raw["Outputs"].(map[string]any)["CmsOutageToleranceSeconds"].(map[string]any)
			if out["Value"] != "15" || !strings.Contains(fmt.Sprint(out["Description"]), "backoff 1s doubling") {
				t.Errorf("output %v", out)
			}
		})
	}
}

// TestDashboardOnCallWidgets: the dashboard had no widget for the event
// DLQ, the quarantine, KeyReloadFailures (the runbook pointed at it),
// Lambda duration and concurrency, DynamoDB capacity and throttles, or
// the age of open work.
func TestDashboardOnCallWidgets(t *testing.T) {
	s := defaultSynth(t)
	body := joinedStrings(s.props(t, "AWS::CloudWatch::Dashboard", "Dashboard")["DashboardBody"])
	for _, want := range []string{
		`"Event DLQ and quarantine depth"`, `"Quarantine oldest message age (s)"`,
		`MetricName=\"` + contract.MetricKeyReloadFailures + `\"`,
		`["AWS/Lambda","Duration"`, `"stat":"p99"`, `["AWS/Lambda","ConcurrentExecutions"`,
		`["AWS/DynamoDB","ConsumedReadCapacityUnits"`, `["AWS/DynamoDB","ConsumedWriteCapacityUnits"`,
		`["AWS/DynamoDB","ReadThrottleEvents"`, `"GlobalSecondaryIndexName"`,
		contract.MetricOldestOpenChangeSeconds, contract.MetricOldestOpenReleaseSeconds,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard lacks %s", want)
		}
	}
}

// alarmStates evaluates a one-period alarm (EvaluationPeriods 1) the way
// CloudWatch does over a series of datapoints (nil: missing), for the
// comparisons and missing-data treatments the quarantine alarms use.
func alarmStates(t *testing.T, p map[string]any, series []*float64) []string {
	t.Helper()
	if p["EvaluationPeriods"] != float64(1) || p["ComparisonOperator"] != "GreaterThanThreshold" {
		t.Fatalf("model covers one-period GreaterThanThreshold alarms: %v", p)
	}
	threshold := p["Threshold"].(float64)
	state, out := "INSUFFICIENT_DATA", []string{}
	for _, v := range series {
		switch {
		case v != nil && *v > threshold:
			state = "ALARM"
		case v != nil:
			state = "OK"
		case p["TreatMissingData"] == "breaching":
			state = "ALARM"
		case p["TreatMissingData"] == "notBreaching":
			state = "OK"
		case p["TreatMissingData"] == "missing":
			state = "INSUFFICIENT_DATA"
		}
		// "ignore": the state stays as it was.
		out = append(out, state)
	}
	return out
}

// TestQuarantineDepthAlarmStaysInAlarmWhileMessagesRemain: the rejected-
// messages alarm fired once and returned to OK after 5 minutes while the
// messages sat in the quarantine until they expired. The depth alarm
// (Maximum visible > 0 per minute, missing data ignored) stays in ALARM
// through any gap in the data while a message remains, and returns to OK
// only on the 0 SQS publishes after the last one is removed; with
// notBreaching a gap would have closed it.
func TestQuarantineDepthAlarmStaysInAlarmWhileMessagesRemain(t *testing.T) {
	s := defaultSynth(t)
	p := s.props(t, "AWS::CloudWatch::Alarm", s.topo.Quarantine.Logical+"QuarantineDepthAlarm")
	one, zero := 1.0, 0.0
	series := []*float64{&one, nil, nil, &one, nil, &one, &zero}
	got := alarmStates(t, p, series)
	want := []string{"ALARM", "ALARM", "ALARM", "ALARM", "ALARM", "ALARM", "OK"}
	if !slices.Equal(got, want) {
		t.Errorf("states %v, want %v", got, want)
	}
	quiet := map[string]any{}
	for k, v := range p {
		quiet[k] = v
	}
	quiet["TreatMissingData"] = "notBreaching"
	if got := alarmStates(t, quiet, series); got[1] != "OK" {
		t.Errorf("the model does not tell the treatments apart: %v", got)
	}
	// The age alarm pages before the 14-day retention deletes the oldest.
	age := s.props(t, "AWS::CloudWatch::Alarm", s.topo.Quarantine.Logical+"QuarantineAgeAlarm")
	if th := age["Threshold"].(float64); th >= float64(s.topo.Quarantine.RetentionSeconds) || th > float64(s.topo.Quarantine.RetentionSeconds-3*24*3600) {
		t.Errorf("age threshold %v s, retention %d s", th, s.topo.Quarantine.RetentionSeconds)
	}
}
