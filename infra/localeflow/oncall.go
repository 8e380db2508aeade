package localeflow

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/topology"
)

// RunbookPath is the runbook every alarm description names a section of
// (docs/runbook.md, "## <section>", anchored as GitHub renders headings),
// unless OncallProps.RunbookURL points at the team's own copy.
const RunbookPath = "docs/runbook.md"

// Severities of the alarms: a page wakes someone, a ticket waits for
// working hours. Each goes to its own topic (OncallProps).
type severity string

const (
	sevPage   severity = "page"
	sevTicket severity = "ticket"
)

// runbookSections maps each alarm (by the end of its construct id) to its
// runbook section's anchor and its severity. An alarm whose id matches
// none gets no runbook reference, which TestEveryAlarmHasARunbookSection
// refuses. Order matters: the first matching suffix wins.
var runbookSections = []struct {
	suffix, anchor string
	severity       severity
}{
	{"EventTargetDLQDepthAlarm", "event-target-dlq-depth", sevPage},
	{"QuarantineDepthAlarm", "quarantine-depth", sevTicket},
	{"QuarantineAgeAlarm", "quarantine-age", sevPage},
	{"DLQDepthAlarm", "queue-dlq-depth", sevPage},
	{"OldestMessageAlarm", "queue-oldest-message", sevPage},
	{"HealthBlockedAlarm", "health-blocked", sevPage},
	// Business outcomes page only with PageOnBusinessOutcomes.
	{"HealthBusinessAlarm", "health-business-outcome", sevTicket},
	{"HealthHeartbeatAlarm", "health-heartbeat", sevPage},
	{"OldestDueAlarm", "oldest-due-record", sevPage},
	{"OldestOpenChangeAlarm", "oldest-open-change", sevTicket},
	{"OldestOpenReleaseAlarm", "oldest-open-release", sevTicket},
	{"ExpiringUnfinishedAlarm", "records-expiring-unfinished", sevTicket},
	{"TableThrottlesAlarm", "table-throttles", sevTicket},
	{"TableSystemErrorsAlarm", "table-system-errors", sevTicket},
	{"RejectedAlarm", "messages-rejected", sevTicket},
	{"KeyReloadAlarm", "key-reload-failed", sevPage},
	{"ErrorsAlarm", "function-errors", sevPage},
	{"ThrottlesAlarm", "function-throttles", sevTicket},
	{"NearTimeoutAlarm", "function-near-timeout", sevTicket},
	{"ScheduleStoppedAlarm", "schedule-stopped", sevTicket},
	{"FailedInvocationsAlarm", "rule-failed-invocations", sevPage},
}

// runbookSection is the anchor and severity of an alarm's construct id.
func runbookSection(logical string) (string, severity, bool) {
	for _, s := range runbookSections {
		if strings.HasSuffix(logical, s.suffix) {
			return s.anchor, s.severity, true
		}
	}
	return "", "", false
}

// runbookRef is the sentence an alarm description ends with.
func (c stackConfig) runbookRef(logical string) string {
	anchor, _, ok := runbookSection(logical)
	if !ok {
		return ""
	}
	return " Runbook: " + c.oncall.runbookURL + "#" + anchor
}

// OncallProps say where the alarms go and what their descriptions link
// to. Props.AlarmTopicArn, HostProps.AlarmTopic and AlarmEmail are the
// page destination; the ticket destination is TicketTopicArn,
// HostProps.TicketTopic, or the construct's own <prefix>-tickets topic
// (AlarmEmail subscribes to it too).
type OncallProps struct {
	// TicketTopicArn is an existing SNS topic for the ticket-severity
	// alarms (not with HostProps.TicketTopic).
	TicketTopicArn string
	// OKNotifications adds OK actions (an alarm's recovery notifies its
	// topic too): off by default, so an incident is one message.
	OKNotifications bool
	// PageOnBusinessOutcomes sends the business-outcome alarm (the CMS
	// failed or blocked a change's publication, a localization job
	// failed upstream) to the page topic instead of the ticket topic.
	PageOnBusinessOutcomes bool
	// RunbookURL is the team's copy of docs/runbook.md (an https:// URL
	// without a fragment); every alarm description ends with
	// "Runbook: <RunbookURL>#<section>". Empty: docs/runbook.md.
	RunbookURL string
}

// oncallConfig is the resolved OncallProps.
type oncallConfig struct {
	ticketTopicArn  string
	okNotifications bool
	pageBusiness    bool
	runbookURL      string
	// healthLimits are the health function's age limits as its config
	// loader read them from the settings the stack gives it.
	healthLimits health.Limits
}

// resolveOncall validates p into cfg.oncall; it runs after the settings
// (the health limits are already in cfg.oncall).
func resolveOncall(cfg *stackConfig, p OncallProps) error {
	o := &cfg.oncall
	o.okNotifications, o.pageBusiness = p.OKNotifications, p.PageOnBusinessOutcomes
	o.ticketTopicArn = strings.TrimSpace(p.TicketTopicArn)
	if o.ticketTopicArn != "" {
		if cfg.host.TicketTopic != nil {
			return errors.New("infra: TicketTopic is given: leave TicketTopicArn empty")
		}
		if !*awscdk.Token_IsUnresolved(jsii.String(o.ticketTopicArn)) && !validSNSArn(o.ticketTopicArn) {
			return fmt.Errorf("infra: TicketTopicArn %q is not an SNS topic ARN", o.ticketTopicArn)
		}
	}
	o.runbookURL = RunbookPath
	if u := strings.TrimSpace(p.RunbookURL); u != "" {
		parsed, err := url.Parse(u)
		if err != nil || parsed.Scheme != "https" || parsed.Host == "" || parsed.Fragment != "" || strings.ContainsAny(u, "# \t\n") {
			return fmt.Errorf("infra: RunbookURL %q must be an https:// URL without a #fragment (the alarms add #<section>)", u)
		}
		o.runbookURL = u
	}
	if o.healthLimits == (health.Limits{}) {
		o.healthLimits = health.DefaultLimits()
	}
	// An open change pages (as a ticket) before the records of the
	// release behind it expire (the release records of a release waiting
	// for a job are in no index; they expire MonitorRetention after their
	// last write).
	if o.healthLimits.MaxChangeAge >= cfg.monitorRetention {
		return fmt.Errorf("infra: setting %s (%s) must be below MonitorRetention (%s): an open change must raise its ticket before the release behind it expires",
			contract.EnvHealthMaxChangeAge, o.healthLimits.MaxChangeAge, cfg.monitorRetention)
	}
	return nil
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
// sum of the backoffs: 75 s with the defaults, so 105 s), both from the
// poller's configuration as its loader reads the environment the stack
// gives it (settings included). A due record is claimed by the next
// sweep (every minute) or its delayed message; one that has waited longer
// than a whole poll interval and the longest outage the retry schedule
// can span is no longer explained by the CMS or by the schedule: the
// poller (or the coordinator) is not draining its work.
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

// Function errors page on 3 of the last 5 one-minute periods with an
// error: one failed invocation (a redelivered message, a sweep redone by
// the next tick) is not an incident; errors that persist for minutes are.
const (
	errorsPeriodMinutes     = 1
	errorsEvaluationPeriods = 5
	errorsDatapointsToAlarm = 3
)

// nearTimeoutFraction: an invocation that ran longer than this share of
// its timeout is near it (a sweep stops at its deadline and leaves the
// rest to the next tick: a ticket, the work is late, not lost).
const nearTimeoutFraction = 0.9

// quarantineAgeMarginDays: the quarantine age alarm pages this long
// before the quarantine's retention deletes its oldest message.
const quarantineAgeMarginDays = 4

// alarmSpec is one alarm; Periods and Datapoints default to 1.
type alarmSpec struct {
	Logical, Name, Description string
	Metric                     awscloudwatch.IMetric
	Threshold                  float64
	Op                         awscloudwatch.ComparisonOperator
	Missing                    awscloudwatch.TreatMissingData
	Periods, Datapoints        int
}

// alarm adds one alarm; its severity comes from runbookSections.
func (b *builder) alarm(a alarmSpec) {
	if a.Periods == 0 {
		a.Periods = 1
	}
	if a.Datapoints == 0 {
		a.Datapoints = a.Periods
	}
	if a.Op == "" {
		a.Op = awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD
	}
	if a.Missing == "" {
		a.Missing = awscloudwatch.TreatMissingData_NOT_BREACHING
	}
	_, sev, _ := runbookSection(a.Logical)
	if strings.HasSuffix(a.Logical, "HealthBusinessAlarm") && b.cfg.oncall.pageBusiness {
		sev = sevPage
	}
	alarm := awscloudwatch.NewAlarm(b.scope, jsii.String(a.Logical), &awscloudwatch.AlarmProps{
		AlarmName:          jsii.String(a.Name),
		AlarmDescription:   jsii.String(fmt.Sprintf("[%s] %s%s", sev, a.Description, b.cfg.runbookRef(a.Logical))),
		Metric:             a.Metric,
		Threshold:          jsii.Number(a.Threshold),
		ComparisonOperator: a.Op,
		EvaluationPeriods:  jsii.Number(a.Periods),
		DatapointsToAlarm:  jsii.Number(a.Datapoints),
		TreatMissingData:   a.Missing,
	})
	b.alarms = append(b.alarms, alarm)
	b.severities = append(b.severities, sev)
}

// addAlarms adds every alarm and its notification: the work queues, the
// health verdicts and ages, the consumers, the functions, the tables, the
// undeliverable events, the quarantine and the schedules.
func (b *builder) addAlarms() {
	b.addQueueAlarms()
	b.addHealthAlarms()
	b.addFunctionAlarms()
	b.addTableAlarms()
	b.addOncallAlarms()
	b.addKeyStateRule()
	b.notify()
}

func (b *builder) addQueueAlarms() {
	for _, q := range b.cfg.topo.Queues() {
		b.alarm(alarmSpec{Logical: q.Logical + "DLQDepthAlarm", Name: q.DLQName + "-depth",
			Description: "messages in " + q.DLQName + ": its consumer failed them " + fmt.Sprint(q.MaxReceiveCount) + " times.",
			Metric:      b.dlqs[q.Logical].MetricApproximateNumberOfMessagesVisible(metricOptions("Maximum", 1))})
		b.alarm(alarmSpec{Logical: q.Logical + "OldestMessageAlarm", Name: q.Name + "-oldest-message",
			Description: fmt.Sprintf("the oldest message in %s is older than %d s: its consumer is not keeping up (throttled or failing).", q.Name, oldestMessageAlarmSeconds),
			Metric:      b.queues[q.Logical].MetricApproximateAgeOfOldestMessage(metricOptions("Maximum", alarmPeriodMinutes)),
			Threshold:   oldestMessageAlarmSeconds})
	}
}

func (b *builder) addHealthAlarms() {
	topo, limits := b.cfg.topo, b.cfg.oncall.healthLimits
	ge := awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD
	// A blocked verdict the on-call must act on pages at once; missing
	// reports are the heartbeat alarm's, which does not page on a single
	// late check.
	b.alarm(alarmSpec{Logical: "HealthBlockedAlarm", Name: topo.Prefix + "-health-blocked",
		Description: "localeflow health reports blocked by a reason the on-call must act on (expired lease, failed or invalid record, blocked release, check failed): open the page with " +
			"`localeflow health --serve --url <HealthUrl output>` (signs with your AWS credentials; " +
			"or `localeflow health --prefix " + topo.Prefix + "`).",
		Metric:    b.customMetric(contract.MetricHealthBlockedOperations, nil, "Maximum", alarmPeriodMinutes),
		Threshold: 1, Op: ge})
	b.alarm(alarmSpec{Logical: "HealthBusinessAlarm", Name: topo.Prefix + "-health-business-outcome",
		Description: "the CMS failed or blocked a change's publication, or a localization job failed upstream: an outcome another team owns (health.monitor.remote_failures, health.release.job_failed).",
		Metric:      b.customMetric(contract.MetricHealthBlockedBusiness, nil, "Maximum", alarmPeriodMinutes),
		Threshold:   1, Op: ge})
	b.alarm(alarmSpec{Logical: "OldestOpenChangeAlarm", Name: topo.Prefix + "-oldest-open-change",
		Description: fmt.Sprintf("a change has been open (not terminal) for more than %s (%s): the CMS keeps it open, or its release waits for a job.completed that never comes.",
			limits.MaxChangeAge, contract.EnvHealthMaxChangeAge),
		Metric:    b.customMetric(contract.MetricOldestOpenChangeSeconds, nil, "Maximum", alarmPeriodMinutes),
		Threshold: limits.MaxChangeAge.Seconds()})
	b.alarm(alarmSpec{Logical: "OldestOpenReleaseAlarm", Name: topo.Prefix + "-oldest-open-release",
		Description: fmt.Sprintf("an open release record (evidence or delivery not finished, a job awaiting its claim, an approval awaiting the delivery) is older than %s (%s).",
			limits.MaxReleaseAge, contract.EnvHealthMaxReleaseAge),
		Metric:    b.customMetric(contract.MetricOldestOpenReleaseSeconds, nil, "Maximum", alarmPeriodMinutes),
		Threshold: limits.MaxReleaseAge.Seconds()})
	b.alarm(alarmSpec{Logical: "ExpiringUnfinishedAlarm", Name: topo.Prefix + "-records-expiring-unfinished",
		Description: fmt.Sprintf("a record that still owes work or its event expires (DynamoDB TTL) within %s (%s).",
			limits.ExpiryWarning, contract.EnvHealthExpiryWarning),
		Metric: b.customMetric(contract.MetricRecordsExpiringUnfinished, nil, "Maximum", alarmPeriodMinutes)})
}

func (b *builder) addFunctionAlarms() {
	for _, fn := range b.cfg.topo.Functions {
		f := b.functions[fn.Dir]
		if fn.Queue != "" {
			// Every rejected message is quarantined with its code: a
			// ticket (the quarantine alarms watch what is left).
			b.alarm(alarmSpec{Logical: fn.Logical + "RejectedAlarm", Name: fn.Name + "-messages-rejected",
				Description: fn.Name + " rejected messages for good (quarantined with their code).",
				Metric:      b.customMetric(MessagesRejectedMetricName, map[string]string{"Function": fn.Dir}, "Sum", alarmPeriodMinutes)})
			// A key secret that cannot be re-read (or holds a malformed
			// set) leaves the function on its previous key set: a
			// rotation step that looks done but is not (docs/security.md
			// "Key rotation runbooks").
			b.alarm(alarmSpec{Logical: fn.Logical + "KeyReloadAlarm", Name: fn.Name + "-key-reload-failed",
				Description: fn.Name + " could not re-read a key secret and keeps its previous key set: see its ERROR log line secretkey.reload_failed (names the secret)",
				Metric:      b.customMetric(KeyReloadFailuresMetricName, map[string]string{"Function": fn.Dir}, "Sum", alarmPeriodMinutes)})
		}
		b.alarm(alarmSpec{Logical: fn.Logical + "ErrorsAlarm", Name: fn.Name + "-errors",
			Description: fmt.Sprintf("%s returned errors in %d of the last %d minutes.", fn.Name, errorsDatapointsToAlarm, errorsEvaluationPeriods),
			Metric:      f.MetricErrors(metricOptions("Sum", errorsPeriodMinutes)),
			Periods:     errorsEvaluationPeriods, Datapoints: errorsDatapointsToAlarm})
		b.alarm(alarmSpec{Logical: fn.Logical + "ThrottlesAlarm", Name: fn.Name + "-throttles",
			Description: fn.Name + " was throttled (the event source or the schedule retries: late, not lost).",
			Metric:      f.MetricThrottles(metricOptions("Sum", alarmPeriodMinutes))})
		timeout := b.cfg.functions[fn.Dir].TimeoutSeconds
		limit := float64(timeout) * 1000 * nearTimeoutFraction
		b.alarm(alarmSpec{Logical: fn.Logical + "NearTimeoutAlarm", Name: fn.Name + "-near-timeout",
			Description: fmt.Sprintf("an invocation of %s ran longer than %.0f%% of its %d s timeout (sweeps stop at their deadline and leave the rest to the next tick).",
				fn.Name, nearTimeoutFraction*100, timeout),
			Metric:    f.MetricDuration(metricOptions("Maximum", alarmPeriodMinutes)),
			Threshold: limit})
	}
}

// tableOperations are the DynamoDB operations the functions and the CLI
// call (no Scan, no GetItem): the SystemErrors alarm sums these.
var tableOperations = []awsdynamodb.Operation{
	awsdynamodb.Operation_QUERY, awsdynamodb.Operation_BATCH_GET_ITEM, awsdynamodb.Operation_PUT_ITEM,
	awsdynamodb.Operation_UPDATE_ITEM, awsdynamodb.Operation_DELETE_ITEM, awsdynamodb.Operation_TRANSACT_WRITE_ITEMS,
}

// tableThrottles is the table's read and write throttle events, on the
// base table and on each of its indexes (the sparse sharded wake and
// attention indexes: a hot shard throttles there first).
func (b *builder) tableThrottles(t topology.Table) awscloudwatch.IMetric {
	table := b.tables[t.Logical]
	using := map[string]awscloudwatch.IMetric{}
	var terms []string
	add := func(id, name string, dims map[string]*string) {
		using[id] = awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("AWS/DynamoDB"), MetricName: jsii.String(name), DimensionsMap: &dims,
			Period: awscdk.Duration_Minutes(jsii.Number(alarmPeriodMinutes)), Statistic: jsii.String("Sum"),
		})
		terms = append(terms, "FILL("+id+", 0)")
	}
	for i, name := range []string{"ReadThrottleEvents", "WriteThrottleEvents"} {
		// Ids unique per table: a dashboard graph holds both tables.
		stem := strings.ToLower(t.Logical)
		add(fmt.Sprintf("%s_t%d", stem, i), name, map[string]*string{"TableName": table.TableName()})
		for j, idx := range t.Indexes {
			add(fmt.Sprintf("%s_i%d%d", stem, j, i), name, map[string]*string{"TableName": table.TableName(), "GlobalSecondaryIndexName": jsii.String(idx.Name)})
		}
	}
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(strings.Join(terms, " + ")), UsingMetrics: &using,
		Label: jsii.String(t.Name + " throttle events"), Period: awscdk.Duration_Minutes(jsii.Number(alarmPeriodMinutes)),
	})
}

func (b *builder) addTableAlarms() {
	for _, t := range b.cfg.topo.Tables() {
		table := b.tables[t.Logical]
		b.alarm(alarmSpec{Logical: t.Logical + "TableThrottlesAlarm", Name: t.Name + "-throttles",
			Description: fmt.Sprintf("DynamoDB throttled requests on %s or its indexes (%s); the SDK retries, the work is late.", t.Name, indexNames(t)),
			Metric:      b.tableThrottles(t)})
		b.alarm(alarmSpec{Logical: t.Logical + "TableSystemErrorsAlarm", Name: t.Name + "-system-errors",
			Description: fmt.Sprintf("DynamoDB answered %s with internal errors (HTTP 500) in 2 of the last 3 periods of %d min.", t.Name, alarmPeriodMinutes),
			Metric: table.MetricSystemErrorsForOperations(&awsdynamodb.SystemErrorsForOperationsMetricOptions{
				Operations: &tableOperations, Period: awscdk.Duration_Minutes(jsii.Number(alarmPeriodMinutes)), Statistic: jsii.String("Sum"),
			}),
			Periods: 3, Datapoints: 2})
	}
}

func indexNames(t topology.Table) string {
	var names []string
	for _, idx := range t.Indexes {
		names = append(names, idx.Name)
	}
	return strings.Join(names, ", ")
}

// addOncallAlarms adds the alarms of undeliverable events, of the
// quarantine, of stopped schedules and of late work: FailedInvocations per
// rule and schedule, the event DLQ's depth, the quarantine's depth and
// age, each schedule's invocations, the oldest due record's age and the
// health heartbeat.
func (b *builder) addOncallAlarms() {
	topo := b.cfg.topo
	failed := func(ruleName string, dims map[string]*string) awscloudwatch.Metric {
		dims["RuleName"] = jsii.String(ruleName)
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("AWS/Events"), MetricName: jsii.String("FailedInvocations"),
			DimensionsMap: &dims, Period: awscdk.Duration_Minutes(jsii.Number(alarmPeriodMinutes)), Statistic: jsii.String("Sum"),
		})
	}
	for _, r := range topo.Rules {
		b.alarm(alarmSpec{Logical: r.Logical + "FailedInvocationsAlarm", Name: r.Name + "-failed-invocations",
			Description: fmt.Sprintf("EventBridge could not deliver events of rule %s to the %s (retried for %d s): they are in %s.",
				r.Name, r.TargetQueue, topo.EventDLQ.MaxEventAgeSeconds, topo.EventDLQ.Name),
			Metric: failed(r.Name, map[string]*string{"EventBusName": jsii.String(b.busName())})})
	}
	for _, s := range topo.Schedules {
		b.alarm(alarmSpec{Logical: s.Logical + "FailedInvocationsAlarm", Name: s.Name + "-failed-invocations",
			Description: fmt.Sprintf("EventBridge could not invoke the %s for schedule %s: the tick is in %s.", s.Function, s.Name, topo.EventDLQ.Name),
			Metric:      failed(s.Name, map[string]*string{})})
		// A schedule that was disabled (or deleted) invokes nothing: its
		// Invocations metric goes missing, which breaches. The health
		// schedule also has the heartbeat alarm (a page).
		periods := max(3, int(math.Ceil(float64(3*s.RateMinutes)/alarmPeriodMinutes)))
		b.alarm(alarmSpec{Logical: s.Logical + "ScheduleStoppedAlarm", Name: s.Name + "-stopped",
			Description: fmt.Sprintf("schedule %s (every %d min) invoked nothing for %d min: the rule is disabled or deleted, or EventBridge stopped invoking it.",
				s.Name, s.RateMinutes, periods*alarmPeriodMinutes),
			Metric: awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String("AWS/Events"), MetricName: jsii.String("Invocations"),
				DimensionsMap: &map[string]*string{"RuleName": jsii.String(s.Name)},
				Period:        awscdk.Duration_Minutes(jsii.Number(alarmPeriodMinutes)), Statistic: jsii.String("SampleCount"),
			}),
			Threshold: 1, Op: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
			Missing: awscloudwatch.TreatMissingData_BREACHING, Periods: periods})
	}
	b.alarm(alarmSpec{Logical: topo.EventDLQ.Logical + "DepthAlarm", Name: topo.EventDLQ.Name + "-depth",
		Description: fmt.Sprintf("events EventBridge could not deliver to a rule target are in %s.", topo.EventDLQ.Name),
		Metric:      b.eventDLQ.MetricApproximateNumberOfMessagesVisible(metricOptions("Maximum", 1))})
	b.addQuarantineAlarms()
	threshold := b.cfg.oldestDueThreshold()
	b.alarm(alarmSpec{Logical: "OldestDueAlarm", Name: topo.Prefix + "-oldest-due",
		Description: fmt.Sprintf("a record has been due for more than %d s (poll interval %s + CMS outage tolerance %s): the work is not drained.",
			int64(threshold/time.Second), b.cfg.monitor.PollInterval, monitor.OutageTolerance(b.cfg.monitor)),
		Metric:    b.customMetric(contract.MetricOldestDueSeconds, nil, "Maximum", alarmPeriodMinutes),
		Threshold: float64(threshold / time.Second)})
	b.alarm(alarmSpec{Logical: "HealthHeartbeatAlarm", Name: topo.Prefix + "-health-heartbeat",
		Description: fmt.Sprintf("the health check reported in fewer than %d of the last %d periods of %d min: it stopped running or cannot write metrics.",
			heartbeatEvaluationPeriods-heartbeatDatapointsToAlarm+1, heartbeatEvaluationPeriods, alarmPeriodMinutes),
		Metric:    b.customMetric(contract.MetricHealthBlocked, nil, "SampleCount", alarmPeriodMinutes),
		Threshold: 1, Op: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
		Periods: heartbeatEvaluationPeriods, Datapoints: heartbeatDatapointsToAlarm,
		Missing: awscloudwatch.TreatMissingData_BREACHING})
}

// addQuarantineAlarms: the depth alarm stays in ALARM while any message
// remains (a rejected message is a ticket until someone replays or
// deletes it), and the age alarm pages quarantineAgeMarginDays before the
// retention deletes the oldest one.
//
// Missing data is IGNORED on purpose for the depth: SQS publishes a
// queue's metrics every minute while the queue holds messages (or was
// touched in the last 6 hours), so missing data can only mean an empty,
// idle queue or a CloudWatch delay; ignoring it keeps the state the last
// datapoint set, so a gap never flips the alarm to OK while messages
// remain, and the zero SQS publishes after the last delete closes it.
func (b *builder) addQuarantineAlarms() {
	q := b.cfg.topo.Quarantine
	b.alarm(alarmSpec{Logical: q.Logical + "QuarantineDepthAlarm", Name: q.Name + "-depth",
		Description: fmt.Sprintf("messages rejected for good wait in %s (localeflow quarantine list): the alarm stays on until each is replayed or removed.", q.Name),
		Metric:      b.quarantine.MetricApproximateNumberOfMessagesVisible(metricOptions("Maximum", 1)),
		Missing:     awscloudwatch.TreatMissingData_IGNORE})
	ageLimit := q.RetentionSeconds - quarantineAgeMarginDays*24*3600
	b.alarm(alarmSpec{Logical: q.Logical + "QuarantineAgeAlarm", Name: q.Name + "-age",
		Description: fmt.Sprintf("the oldest message in %s is older than %d days: SQS deletes it at %d days (its retention).",
			q.Name, ageLimit/(24*3600), q.RetentionSeconds/(24*3600)),
		Metric:    b.quarantine.MetricApproximateAgeOfOldestMessage(metricOptions("Maximum", alarmPeriodMinutes)),
		Threshold: float64(ageLimit), Missing: awscloudwatch.TreatMissingData_IGNORE})
}

// kmsKeyStateEvents are the CloudTrail events of a key leaving service.
// (Not PutKeyPolicy: every deploy that changes a grant writes the policy,
// and a page on each deploy would be noise.)
var kmsKeyStateEvents = []string{"DisableKey", "ScheduleKeyDeletion"}

// addKeyStateRule pages when the data key is disabled or scheduled for
// deletion. KMS publishes no CloudWatch metric
// of a key's state, so an EventBridge rule on the account's default bus
// matches the CloudTrail management events (which EventBridge receives
// only where a CloudTrail trail records management events: the team's
// part, docs/runbook.md "data-key-state").
func (b *builder) addKeyStateRule() {
	if b.key == nil {
		return
	}
	awsevents.NewRule(b.scope, jsii.String("DataKeyStateRule"), &awsevents.RuleProps{
		RuleName:    jsii.String(b.cfg.topo.Prefix + "-data-key-state"),
		Description: jsii.String("page when the localeflow data key is disabled or scheduled for deletion (CloudTrail)"),
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings("aws.kms"),
			DetailType: jsii.Strings("AWS API Call via CloudTrail"),
			Detail: &map[string]any{
				"eventSource": []string{"kms.amazonaws.com"},
				"eventName":   kmsKeyStateEvents,
				// The CloudTrail record names the key's ARN whatever
				// the caller passed (id, ARN or alias).
				"resources": map[string]any{"ARN": []any{b.key.AttrArn()}},
			},
		},
	})
}

// notify sends each alarm to its severity's topic (OK actions only with
// OKNotifications), and the key-state rule to the page topic.
func (b *builder) notify() {
	topo, o := b.cfg.topo, b.cfg.oncall
	newTopic := func(id, name, display string) awssns.Topic {
		t := awssns.NewTopic(b.scope, jsii.String(id), &awssns.TopicProps{
			TopicName: jsii.String(name), DisplayName: jsii.String(display), EnforceSSL: jsii.Bool(true),
		})
		if b.cfg.alarmEmail != "" {
			t.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(b.cfg.alarmEmail), nil))
		}
		return t
	}
	switch {
	case b.cfg.host.AlarmTopic != nil:
		b.topic = b.cfg.host.AlarmTopic
	case b.cfg.alarmTopicArn != "":
		b.topic = awssns.Topic_FromTopicArn(b.scope, jsii.String("AlarmTopic"), jsii.String(b.cfg.alarmTopicArn))
	default:
		b.alarmTopic = newTopic("AlarmTopic", topo.Prefix+"-alarms", "localeflow "+topo.Prefix+" pages")
		b.topic = b.alarmTopic
	}
	switch {
	case b.cfg.host.TicketTopic != nil:
		b.ticketTopic = b.cfg.host.TicketTopic
	case o.ticketTopicArn != "":
		b.ticketTopic = awssns.Topic_FromTopicArn(b.scope, jsii.String("TicketTopic"), jsii.String(o.ticketTopicArn))
	case b.alarmTopic == nil:
		// The team gave its page topic and no ticket topic: tickets go
		// there too, told apart by the [ticket] the description starts
		// with (a severity a subscription filter or a router can match).
		b.ticketTopic = b.topic
	default:
		b.ticketTopic = newTopic("TicketTopic", topo.Prefix+"-tickets", "localeflow "+topo.Prefix+" tickets")
	}
	for i, a := range b.alarms {
		topic := b.topic
		if b.severities[i] == sevTicket {
			topic = b.ticketTopic
		}
		a.AddAlarmAction(awscloudwatchactions.NewSnsAction(topic))
		if o.okNotifications {
			a.AddOkAction(awscloudwatchactions.NewSnsAction(topic))
		}
	}
	if rule, ok := b.scope.Node().TryFindChild(jsii.String("DataKeyStateRule")).(awsevents.Rule); ok && rule != nil {
		rule.AddTarget(awseventstargets.NewSnsTopic(b.topic, nil))
	}
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

// addDashboard is the on-call view of one deployment. Its custom metrics
// are the ones topology lists (the names the functions emit); a series
// per dimension value (state, code) comes from a SEARCH of this
// deployment's metrics.
func (b *builder) addDashboard() {
	topo := b.cfg.topo
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Width: jsii.Number(8), Height: jsii.Number(6), Left: &metrics,
		})
	}
	gauges := func(names ...string) []awscloudwatch.IMetric {
		out := make([]awscloudwatch.IMetric, 0, len(names))
		for _, n := range names {
			out = append(out, b.customMetric(n, nil, "Maximum", alarmPeriodMinutes))
		}
		return out
	}
	// search is every series of metric name in this deployment split by
	// the dimension, summed per minute.
	search := func(label, name, dimension string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,%s,%s} MetricName="%s" %s="%s"', 'Sum', 60)`,
				contract.MetricNamespace, DeploymentDimension, dimension, name, DeploymentDimension, topo.Prefix)),
			Label:        jsii.String(label),
			UsingMetrics: &map[string]awscloudwatch.IMetric{},
			Period:       awscdk.Duration_Minutes(jsii.Number(1)),
		})
	}
	perMinute := func(name string) awscloudwatch.IMetric {
		return b.customMetric(name, nil, "Sum", 1)
	}
	var invocations, errs, dlq, oldest []awscloudwatch.IMetric
	// Each remote call kind's latency (one value per call, internal/remotecall).
	var latency []awscloudwatch.IMetric
	for _, name := range []string{contract.MetricCMSLifecycleLatency, contract.MetricCMSDeliveryLatency, contract.MetricEvidenceLatency} {
		latency = append(latency, b.customMetric(name, nil, "p50", 1), b.customMetric(name, nil, "p99", 1))
	}
	for _, fn := range topo.Functions {
		f := b.functions[fn.Dir]
		invocations = append(invocations, f.MetricInvocations(metricOptions("Sum", 1)))
		errs = append(errs, f.MetricErrors(metricOptions("Sum", 1)), f.MetricThrottles(metricOptions("Sum", 1)))
	}
	for _, q := range topo.Queues() {
		dlq = append(dlq, b.dlqs[q.Logical].MetricApproximateNumberOfMessagesVisible(metricOptions("Maximum", 1)))
		oldest = append(oldest, b.queues[q.Logical].MetricApproximateAgeOfOldestMessage(metricOptions("Maximum", 1)))
	}
	rejected := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,%s,%s,%s} MetricName="%s" %s="%s"', 'Sum', 60)`,
			contract.MetricNamespace, DeploymentDimension, contract.MetricFunctionDimension, contract.MetricCodeDimension,
			contract.MetricMessagesRejected, DeploymentDimension, topo.Prefix)),
		Label:        jsii.String("rejected by code"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{},
		Period:       awscdk.Duration_Minutes(jsii.Number(1)),
	})
	var duration, concurrency, capacity, throttles []awscloudwatch.IMetric
	for _, fn := range topo.Functions {
		f := b.functions[fn.Dir]
		duration = append(duration, f.MetricDuration(metricOptions("p99", 1)), f.MetricDuration(metricOptions("Maximum", 1)))
		concurrency = append(concurrency, f.Metric(jsii.String("ConcurrentExecutions"), metricOptions("Maximum", 1)))
	}
	for _, t := range topo.Tables() {
		table := b.tables[t.Logical]
		capacity = append(capacity, table.MetricConsumedReadCapacityUnits(metricOptions("Sum", 1)),
			table.MetricConsumedWriteCapacityUnits(metricOptions("Sum", 1)))
		throttles = append(throttles, b.tableThrottles(t))
	}
	parked := []awscloudwatch.IMetric{
		b.eventDLQ.MetricApproximateNumberOfMessagesVisible(metricOptions("Maximum", 1)),
		b.quarantine.MetricApproximateNumberOfMessagesVisible(metricOptions("Maximum", 1)),
	}
	keyReloads := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,%s,%s} MetricName="%s" %s="%s"', 'Sum', 60)`,
			contract.MetricNamespace, DeploymentDimension, contract.MetricFunctionDimension,
			contract.MetricKeyReloadFailures, DeploymentDimension, topo.Prefix)),
		Label:        jsii.String("key reload failures by function"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{},
		Period:       awscdk.Duration_Minutes(jsii.Number(1)),
	})
	b.dashboard = awscloudwatch.NewDashboard(b.scope, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(topo.Prefix + "-operations"),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{
				graph("Polls per minute (total, by outcome state)", perMinute(contract.MetricPolls),
					search("polls by state", contract.MetricPolls, contract.MetricStateDimension)),
				graph("Poll failures per minute by code", search("poll failures by code", contract.MetricPollFailures, contract.MetricCodeDimension)),
				graph("Health status (1 = blocked)", gauges(contract.MetricHealthBlocked, contract.MetricHealthCheckFailed, contract.MetricInvalidRecords)...),
			},
			{
				graph("Due backlog (records due now)", gauges(contract.MetricMonitorDue, contract.MetricEvidenceDue, contract.MetricDeliveryDue)...),
				graph("Oldest due record age (s)", gauges(contract.MetricOldestDueSeconds)...),
				graph("Monitor states", gauges(contract.MetricMonitorPending, contract.MetricMonitorWatching, contract.MetricMonitorRetryWait,
					contract.MetricMonitorLeased, contract.MetricMonitorExpiredLeases, contract.MetricMonitorFailed, contract.MetricMonitorRemoteFailures)...),
			},
			{
				graph("Evidence steps per minute by outcome", search("evidence steps by outcome", contract.MetricEvidenceSteps, contract.MetricStateDimension)),
				graph("Delivery steps per minute by outcome", search("delivery steps by outcome", contract.MetricDeliverySteps, contract.MetricStateDimension)),
				graph("Evidence and delivery failures per minute by code",
					search("evidence failures by code", contract.MetricEvidenceFailures, contract.MetricCodeDimension),
					search("delivery failures by code", contract.MetricDeliveryFailures, contract.MetricCodeDimension)),
			},
			{
				graph("Evidence and delivery records (open, failed)", gauges(contract.MetricEvidenceOpen, contract.MetricEvidenceFailed,
					contract.MetricDeliveryOpen, contract.MetricDeliveryFailed)...),
				graph("DLQ depth", dlq...),
				graph("Oldest message age (s)", oldest...),
			},
			{
				graph("Remote call latency p50 / p99 (ms)", latency...),
			},
			{
				graph("Invocations per minute (polls, release steps, health)", invocations...),
				graph("Errors and throttles per minute", errs...),
				graph("Rejected messages by code", rejected),
			},
			{
				graph("Open work age (s): oldest open change, oldest open release", gauges(contract.MetricOldestOpenChangeSeconds,
					contract.MetricOldestOpenReleaseSeconds, contract.MetricRecordsExpiringUnfinished)...),
				graph("Event DLQ and quarantine depth", parked...),
				graph("Quarantine oldest message age (s)", b.quarantine.MetricApproximateAgeOfOldestMessage(metricOptions("Maximum", 1))),
			},
			{
				graph("Key reload failures by function", keyReloads),
				graph("Lambda duration p99 / max (ms)", duration...),
				graph("Lambda concurrent executions", concurrency...),
			},
			{
				graph("DynamoDB consumed read / write capacity", capacity...),
				graph("DynamoDB throttle events (tables and indexes)", throttles...),
			},
		},
	})
}
