package localeflow

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/monitor"
)

// RunbookPath is the runbook every alarm description names a section of
// (docs/runbook.md, "## <section>", anchored as GitHub renders headings).
const RunbookPath = "docs/runbook.md"

// runbookSections maps each alarm (by the end of its construct id) to its
// runbook section's anchor. An alarm whose id matches none gets no runbook
// reference, which TestEveryAlarmHasARunbookSection refuses.
var runbookSections = []struct{ suffix, anchor string }{
	{"EventTargetDLQDepthAlarm", "event-target-dlq-depth"},
	{"DLQDepthAlarm", "queue-dlq-depth"},
	{"OldestMessageAlarm", "queue-oldest-message"},
	{"HealthBlockedAlarm", "health-blocked"},
	{"HealthHeartbeatAlarm", "health-heartbeat"},
	{"OldestDueAlarm", "oldest-due-record"},
	{"RejectedAlarm", "messages-rejected"},
	{"KeyReloadAlarm", "key-reload-failed"},
	{"ErrorsAlarm", "function-errors"},
	{"ThrottlesAlarm", "function-throttles"},
	{"FailedInvocationsAlarm", "rule-failed-invocations"},
}

// runbookRef is the sentence an alarm description ends with.
func runbookRef(logical string) string {
	for _, s := range runbookSections {
		if strings.HasSuffix(logical, s.suffix) {
			return " Runbook: " + RunbookPath + "#" + s.anchor
		}
	}
	return ""
}

// addEventDLQ creates the dead-letter queue of every rule target. It keeps
// SQS-managed encryption, not the data key, on purpose: an input event
// that cannot reach the key-encrypted release queue because the key (or
// its policy) is unusable must still land somewhere, and a DLQ under the
// same key would refuse it for the same reason (docs/security.md).
func (b *builder) addEventDLQ() {
	d := b.cfg.topo.EventDLQ
	b.eventDLQ = b.newQueue(d.Logical, d.Name, &awssqs.QueueProps{
		RetentionPeriod: awscdk.Duration_Seconds(jsii.Number(d.RetentionSeconds)),
	})
}

// addArchive keeps every input event the rules route (source localeflow,
// the input detail-types) for the topology's retention, for `localeflow
// replay`. Events the functions emit are not archived: a replay re-runs
// inputs, and the outputs follow from them.
func (b *builder) addArchive() {
	a := b.cfg.topo.Archive
	b.archive = awsevents.NewArchive(b.scope, jsii.String(a.Logical), &awsevents.ArchiveProps{
		ArchiveName:    jsii.String(a.Name),
		Description:    jsii.String(fmt.Sprintf("localeflow %s: input events, %d days, for localeflow replay", b.cfg.topo.Prefix, a.RetentionDays)),
		SourceEventBus: b.bus,
		EventPattern:   b.cfg.inputPattern(b.cfg.topo.InputDetailTypes()),
		Retention:      awscdk.Duration_Days(jsii.Number(a.RetentionDays)),
	})
}

// Input rule targets retry a failed delivery for at most an hour (185
// attempts, the EventBridge maximum, within that hour), then send the
// event to the event DLQ: a broken target pages within the hour instead
// of after EventBridge's default 24 h.
func (b *builder) inputTargetRetry() (awscdk.Duration, *float64) {
	d := b.cfg.topo.EventDLQ
	return awscdk.Duration_Seconds(jsii.Number(d.MaxEventAgeSeconds)), jsii.Number(d.RetryAttempts)
}

// oldestDueThreshold is the OldestDueSeconds alarm's threshold: one poll
// interval plus the CMS outage tolerance (its upper end, the unjittered
// sum of the backoffs: 75 s with the defaults, so 105 s). A due record is
// claimed by the next sweep (every minute) or its delayed message; one
// that has waited longer than a whole poll interval and the longest
// outage the retry schedule can span is no longer explained by the CMS or
// by the schedule: the poller (or the coordinator) is not draining its
// work.
func (c stackConfig) oldestDueThreshold() time.Duration {
	return c.monitor.PollInterval + monitor.OutageTolerance(c.monitor)
}

// Heartbeat alarm shape: the health check runs every 5 minutes and
// publishes HealthBlocked each run. The heartbeat alarm counts the samples
// per 5-minute period and breaches on an empty period, but it pages only
// when 2 of the last 3 periods are empty. A single late check leaves one
// period empty and the next one with two samples (1 of 3): no page; a
// health function that stopped pages within 10 to 15 minutes.
const (
	heartbeatEvaluationPeriods = 3
	heartbeatDatapointsToAlarm = 2
)

// addOncallAlarms adds the alarms of undeliverable events and of late work:
// FailedInvocations per rule and schedule, the event DLQ's depth, the
// oldest due record's age and the health heartbeat.
func (b *builder) addOncallAlarms() {
	topo := b.cfg.topo
	gt := awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD
	quiet := awscloudwatch.TreatMissingData_NOT_BREACHING
	failed := func(ruleName string, dims map[string]*string) awscloudwatch.Metric {
		dims["RuleName"] = jsii.String(ruleName)
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("AWS/Events"), MetricName: jsii.String("FailedInvocations"),
			DimensionsMap: &dims, Period: awscdk.Duration_Minutes(jsii.Number(alarmPeriodMinutes)), Statistic: jsii.String("Sum"),
		})
	}
	for _, r := range topo.Rules {
		b.alarm(r.Logical+"FailedInvocationsAlarm", r.Name+"-failed-invocations",
			fmt.Sprintf("EventBridge could not deliver events of rule %s to the %s (retried for %d s): they are in %s.",
				r.Name, r.TargetQueue, topo.EventDLQ.MaxEventAgeSeconds, topo.EventDLQ.Name),
			failed(r.Name, map[string]*string{"EventBusName": jsii.String(b.busName())}), 0, gt, quiet)
	}
	for _, s := range topo.Schedules {
		b.alarm(s.Logical+"FailedInvocationsAlarm", s.Name+"-failed-invocations",
			fmt.Sprintf("EventBridge could not invoke the %s for schedule %s: the tick is in %s.", s.Function, s.Name, topo.EventDLQ.Name),
			failed(s.Name, map[string]*string{}), 0, gt, quiet)
	}
	b.alarm(topo.EventDLQ.Logical+"DepthAlarm", topo.EventDLQ.Name+"-depth",
		fmt.Sprintf("events EventBridge could not deliver to a rule target are in %s.", topo.EventDLQ.Name),
		b.eventDLQ.MetricApproximateNumberOfMessagesVisible(metricOptions("Maximum", 1)), 0, gt, quiet)
	threshold := b.cfg.oldestDueThreshold()
	b.alarm("OldestDueAlarm", topo.Prefix+"-oldest-due",
		fmt.Sprintf("a record has been due for more than %d s (poll interval %s + CMS outage tolerance %s): the work is not drained.",
			int64(threshold/time.Second), b.cfg.monitor.PollInterval, monitor.OutageTolerance(b.cfg.monitor)),
		b.customMetric(contract.MetricOldestDueSeconds, nil, "Maximum", alarmPeriodMinutes),
		float64(threshold/time.Second), gt, quiet)
	heartbeat := awscloudwatch.NewAlarm(b.scope, jsii.String("HealthHeartbeatAlarm"), &awscloudwatch.AlarmProps{
		AlarmName: jsii.String(topo.Prefix + "-health-heartbeat"),
		AlarmDescription: jsii.String(fmt.Sprintf("the health check reported in fewer than %d of the last %d periods of %d min: it stopped running or cannot write metrics.",
			heartbeatEvaluationPeriods-heartbeatDatapointsToAlarm+1, heartbeatEvaluationPeriods, alarmPeriodMinutes) + runbookRef("HealthHeartbeatAlarm")),
		Metric:             b.customMetric(contract.MetricHealthBlocked, nil, "SampleCount", alarmPeriodMinutes),
		Threshold:          jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(heartbeatEvaluationPeriods),
		DatapointsToAlarm:  jsii.Number(heartbeatDatapointsToAlarm),
		TreatMissingData:   awscloudwatch.TreatMissingData_BREACHING,
	})
	b.alarms = append(b.alarms, heartbeat)
}

// queryDefinition is one saved Logs Insights query.
type queryDefinition struct {
	Logical, Stem string
	// Functions are the function dirs whose log groups it reads.
	Functions []string
	Query     string
}

// queryDefinitions are the saved queries of the common on-call questions
// (docs/runbook.md names them). Every field they read is one the functions
// log (docs/design.md "Logs").
var queryDefinitions = []queryDefinition{
	{
		Logical: "ChangeHistoryQuery", Stem: "change-history", Functions: []string{"poller", "coordinator"},
		Query: strings.Join([]string{
			"fields @timestamp, @log, level, msg, event_id, state, remote_status, status, kind, code, attempt, request_id, xray_trace_id",
			`| filter event_id = "REPLACE_WITH_EVENT_ID"`,
			"| sort @timestamp asc",
			"| limit 1000",
		}, "\n"),
	},
	{
		Logical: "FailuresByCodeQuery", Stem: "failures-by-code", Functions: []string{"poller", "coordinator", "health"},
		Query: strings.Join([]string{
			"fields @timestamp, @log, msg, code",
			`| filter ispresent(code) and level in ["WARN", "ERROR"]`,
			"| stats count(*) as failures, count_distinct(event_id) as changes by code, @log",
			"| sort failures desc",
		}, "\n"),
	},
	{
		Logical: "SlowestCMSCallsQuery", Stem: "slowest-cms-calls", Functions: []string{"poller", "coordinator"},
		// One document per invocation (internal/remotecall) names its
		// slowest call: kind, milliseconds and the signed request id the
		// CMS logs too.
		Query: strings.Join([]string{
			"fields @timestamp, @log, slowest_remote, slowest_remote_ms, slowest_request_id, remote_calls, request_id, xray_trace_id",
			`| filter msg = "` + contract.LogRemoteCalls + `" and slowest_remote like /^cms_/`,
			"| sort slowest_remote_ms desc",
			"| limit 50",
		}, "\n"),
	},
}

// addQueryDefinitions saves the queries under <prefix>/<stem> in the Logs
// Insights console.
func (b *builder) addQueryDefinitions() {
	byDir := map[string]string{}
	for _, fn := range b.cfg.topo.Functions {
		byDir[fn.Dir] = "/aws/lambda/" + fn.Name
	}
	for _, q := range queryDefinitions {
		var groups []any
		for _, dir := range q.Functions {
			groups = append(groups, byDir[dir])
		}
		awslogs.NewCfnQueryDefinition(b.scope, jsii.String(q.Logical), &awslogs.CfnQueryDefinitionProps{
			Name:          jsii.String(b.cfg.topo.Prefix + "/" + q.Stem),
			QueryString:   jsii.String(q.Query),
			LogGroupNames: &groups,
		})
	}
}
