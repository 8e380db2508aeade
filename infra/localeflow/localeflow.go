package localeflow

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/contract"
	coordinatorconfig "github.com/localeflow/localeflow/functions/coordinator/config"
	"github.com/localeflow/localeflow/topology"
)

// Tags on every resource of the construct (and on NewStack's stack). Both
// keys are namespaced: a team's own tags (application, team, cost-center)
// on its stack reach the construct's resources unchanged.
const (
	TagApplication = "localeflow:application"
	TagPrefix      = "localeflow:prefix"
)

// logRetention of the functions' log groups.
const logRetention = awslogs.RetentionDays_ONE_MONTH

// secretSpec is one Secrets Manager secret holding key material.
//
// Every secret is generated at deploy as 64 lowercase hex digits (32 random
// bytes), the SecretString format the functions read: a usable HMAC key, or
// an Ed25519 seed. Operators may replace any value with put-secret-value
// (README.md); key material never appears in the template or in env vars.
type secretSpec struct {
	Logical     string
	Stem        string // secret name is <prefix>/<Stem>
	Env         string
	Description string
	// Readers are the function dirs allowed to read it.
	Readers []string
}

var secretSpecs = []secretSpec{
	{
		Logical: "CMSKeySecret", Stem: "cms-hmac-key", Env: EnvCMSKeySecret,
		Description: "HMAC-SHA256 key shared with the CMS (lifecycle and delivery API signatures), hex",
		Readers:     []string{"poller", "coordinator"},
	},
	{
		Logical: "EventKeySecret", Stem: "event-hmac-key", Env: EnvEventKeySecret,
		Description: "HMAC-SHA256 key of signed change.dispatched / plan.accepted / job.completed events, hex",
		Readers:     []string{"poller", "coordinator"},
	},
	{
		Logical: "EvidenceKeySecret", Stem: "evidence-hmac-key", Env: EnvEvidenceKeySecret,
		Description: "HMAC-SHA256 key shared with the evidence provider (request signatures), hex",
		Readers:     []string{"coordinator"},
	},
	{
		Logical: "ApprovalKeySecret", Stem: "approval-ed25519-key", Env: EnvApprovalKeySecret,
		Description: "Ed25519 seed of the approval authority, hex",
		Readers:     []string{"coordinator"},
	},
	{
		Logical: "PublicationKeySecret", Stem: "publication-ed25519-key", Env: EnvPublicationKeySecret,
		Description: "Ed25519 seed of the publication authority, hex",
		Readers:     []string{"coordinator"},
	},
}

// hexSecret makes Secrets Manager generate 64 lowercase hex digits: digits
// and a-f only (no uppercase, no punctuation, g-z excluded).
var hexSecret = &awssecretsmanager.CfnSecret_GenerateSecretStringProperty{
	PasswordLength:     jsii.Number(64),
	ExcludeUppercase:   jsii.Bool(true),
	ExcludePunctuation: jsii.Bool(true),
	ExcludeCharacters:  jsii.String("ghijklmnopqrstuvwxyz"),
}

// builder holds the constructs while the construct is assembled.
type builder struct {
	scope   constructs.Construct
	cfg     stackConfig
	removal awscdk.RemovalPolicy
	tables  map[string]awsdynamodb.Table
	queues  map[string]awssqs.Queue
	dlqs    map[string]awssqs.Queue
	// quarantine keeps the messages the consumers reject for good.
	quarantine awssqs.Queue
	bus        awsevents.IEventBus
	// eventDLQ is the dead-letter queue of every rule target; archive
	// keeps the bus's input events.
	eventDLQ awssqs.Queue
	archive  awsevents.Archive
	secrets  map[string]awssecretsmanager.CfnSecret
	// key is the customer-managed data key (nil with CustomerManagedKey
	// false or a host key), keyPolicy its policy (cross-account grants add
	// to it); hostKey is HostProps.DataKey.
	key       awskms.CfnKey
	keyPolicy awsiam.PolicyDocument
	hostKey   awskms.IKey
	// stackEnv is each function's environment as the construct set it
	// (checkEnvironment compares the final one with it).
	stackEnv  map[string]map[string]*string
	functions map[string]awslambda.Function
	roles     map[string]awsiam.Role
	alarms    []awscloudwatch.Alarm
	// alarmTopic is the topic the construct created (nil with
	// AlarmTopicArn); topic is the one every alarm notifies.
	alarmTopic awssns.Topic
	topic      awssns.ITopic
	// ticketTopic receives the ticket-severity alarms (topic the pages).
	ticketTopic awssns.ITopic
	// severities[i] is the severity of alarms[i].
	severities []severity
	healthURL  awslambda.FunctionUrl
	dashboard  awscloudwatch.Dashboard
}

// stackNamePattern is CloudFormation's rule for stack names; the id names
// the stack unless StackProps.StackName is set.
var stackNamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,127}$`)

// DefaultStackNameBase is the stack name of the default prefix; another
// prefix deploys as DefaultStackNameBase-<prefix> (DefaultStackName).
const DefaultStackNameBase = "Localeflow"

// PrefixOrDefault is prefix, or topology.DefaultPrefix when empty.
func PrefixOrDefault(prefix string) string {
	if prefix == "" {
		return topology.DefaultPrefix
	}
	return prefix
}

// DefaultStackName is the app's stack name for prefix: Localeflow for the
// default prefix (existing deployments keep their stack), else
// Localeflow-<prefix>, so a second prefix is a second stack instead of an
// update that replaces the first deployment's resources.
func DefaultStackName(prefix string) string {
	prefix = PrefixOrDefault(prefix)
	if prefix == topology.DefaultPrefix {
		return DefaultStackNameBase
	}
	return DefaultStackNameBase + "-" + prefix
}

// IsDefaultStackName says whether name has the form DefaultStackName gives
// some prefix (Localeflow or Localeflow-<valid prefix>).
func IsDefaultStackName(name string) bool {
	if name == DefaultStackNameBase {
		return true
	}
	rest, ok := strings.CutPrefix(name, DefaultStackNameBase+"-")
	return ok && topology.ValidatePrefix(rest) == nil
}

// StackConstructID is the id NewStack gives the construct inside its
// stack. CDK leaves a path segment named "Default" out of logical IDs, so
// the stack's logical IDs are the construct's own ids (MonitorTable,
// PollQueue, ...), the same as before localeflow was a construct: an
// existing deployment updates in place instead of replacing its tables.
const StackConstructID = "Default"

// NewStack builds a stack that holds only localeflow (the app in infra/
// deploys this): the construct under StackConstructID, the stack's
// description and tags. Leave props.Env unset for an environment-agnostic
// template (no lookups).
func NewStack(scope constructs.Construct, id string, props *StackProps) (*Localeflow, error) {
	if props == nil {
		return nil, errors.New("infra: props are required")
	}
	cfg, err := resolve(&props.Props)
	if err != nil {
		return nil, err
	}
	// The app's stack is the deployment: its outputs are what `make
	// deploy` prints and `localeflow keys` reads.
	cfg.outputs = true
	sp := props.StackProps
	name := id
	if sp.StackName != nil {
		name = *sp.StackName
	}
	if !stackNamePattern.MatchString(name) {
		return nil, fmt.Errorf("infra: stack name %q is not a CloudFormation stack name (%s)", name, stackNamePattern)
	}
	if sp.Description == nil {
		sp.Description = jsii.String(fmt.Sprintf("localeflow (%s): lifecycle monitor, release coordinator, health", cfg.topo.Prefix))
	}
	if scope != nil && scope.Node().TryFindChild(jsii.String(id)) != nil {
		return nil, fmt.Errorf("infra: scope already has a construct %q", id)
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &sp)
	// The stack's own tags (CloudFormation propagates them at deploy).
	tag(stack, cfg)
	return build(stack, StackConstructID, cfg), nil
}

// New builds the whole localeflow deployment inside scope (any construct,
// typically a team's own stack): the two DynamoDB tables with their sparse
// indexes, the poll and release queues with DLQs, the quarantine queue,
// the event bus with its routing rules, the schedules, the three Lambda
// functions with their event source mappings, the health Function URL, the
// key secrets, the customer-managed key, the alarms, the dashboard and
// least-privilege roles (stack outputs only with props.Outputs); a host's
// alarm topic, event bus and VPC through props.HostProps. Resource names come from
// props.Prefix, so two deployments in one account need two prefixes.
func New(scope constructs.Construct, id string, props *Props) (*Localeflow, error) {
	if scope == nil {
		return nil, errors.New("infra: scope is required")
	}
	if id == "" {
		return nil, errors.New("infra: construct id is required")
	}
	if scope.Node().TryFindChild(jsii.String(id)) != nil {
		return nil, fmt.Errorf("infra: scope already has a construct %q", id)
	}
	cfg, err := resolve(props)
	if err != nil {
		return nil, err
	}
	return build(scope, id, cfg), nil
}

// build adds every resource under a new construct id in scope.
func build(scope constructs.Construct, id string, cfg stackConfig) *Localeflow {
	b := &builder{
		scope:     constructs.NewConstruct(scope, jsii.String(id)),
		cfg:       cfg,
		removal:   awscdk.RemovalPolicy_DESTROY,
		tables:    map[string]awsdynamodb.Table{},
		queues:    map[string]awssqs.Queue{},
		dlqs:      map[string]awssqs.Queue{},
		secrets:   map[string]awssecretsmanager.CfnSecret{},
		functions: map[string]awslambda.Function{},
		roles:     map[string]awsiam.Role{},
		stackEnv:  map[string]map[string]*string{},
	}
	if cfg.deletionProtection {
		b.removal = awscdk.RemovalPolicy_RETAIN
	}
	if cfg.customerManagedKey || cfg.host.DataKey != nil {
		b.addKey()
	}
	for _, t := range cfg.topo.Tables() {
		b.addTable(t)
	}
	for _, q := range cfg.topo.Queues() {
		b.addQueue(q)
	}
	b.quarantine = b.newQueue(cfg.topo.Quarantine.Logical, cfg.topo.Quarantine.Name, &awssqs.QueueProps{
		RetentionPeriod: awscdk.Duration_Seconds(jsii.Number(cfg.topo.Quarantine.RetentionSeconds)),
	})
	// The texts live in the release table; plan events (source texts)
	// travel through the release queue, its DLQ and, when rejected, the
	// quarantine queue. The monitor table and the poll queue hold ids,
	// states and hashes only and keep AWS-managed encryption.
	b.encryptTable(b.tables[cfg.topo.Release.Logical])
	b.encryptQueue(b.queues[cfg.topo.RelQueue.Logical])
	b.encryptQueue(b.dlqs[cfg.topo.RelQueue.Logical])
	b.encryptQueue(b.quarantine)
	if cfg.host.EventBus != nil {
		b.bus = cfg.host.EventBus
	} else {
		b.bus = awsevents.NewEventBus(b.scope, jsii.String("EventBus"), &awsevents.EventBusProps{
			EventBusName: jsii.String(cfg.topo.BusName),
		})
	}
	b.addEventDLQ()
	b.addArchive()
	b.addSchemaRegistry()
	for _, s := range secretSpecs {
		b.addSecret(s)
	}
	for _, fn := range cfg.topo.Functions {
		b.addFunction(cfg.functions[fn.Dir])
	}
	b.grant()
	for logical, secret := range b.addPublicKeySecrets() {
		b.secrets[logical] = secret
	}
	b.healthURL = b.functions["health"].AddFunctionUrl(&awslambda.FunctionUrlOptions{
		AuthType: awslambda.FunctionUrlAuthType_AWS_IAM,
	})
	for _, r := range cfg.topo.Rules {
		b.addRule(r)
	}
	for _, s := range cfg.topo.Schedules {
		b.addSchedule(s)
	}
	b.addAlarms()
	b.addQueryDefinitions()
	b.addDashboard()
	if cfg.outputs {
		b.addOutputs()
	}
	tag(b.scope, cfg)
	if cfg.synthOnly && cfg.receiptIssuers == (ReceiptIssuers{}) {
		awscdk.Annotations_Of(b.scope).AddWarningV2(jsii.String("localeflow:no-receipt-issuers"), jsii.String(
			"SynthOnly without receipt issuers: a template to read, not to deploy (the coordinator refuses to start without "+
				"ReceiptIssuers; make deploy requires RECEIPT_ISSUERS_QUALITY, _HUMAN_REVIEW and _INDEPENDENT_REVIEW)"), nil)
	}
	b.suppressFindings()
	return b.construct()
}

// tag says on every resource of scope what it belongs to.
func tag(scope constructs.IConstruct, cfg stackConfig) {
	awscdk.Tags_Of(scope).Add(jsii.String(TagApplication), jsii.String("localeflow"), nil)
	awscdk.Tags_Of(scope).Add(jsii.String(TagPrefix), jsii.String(cfg.topo.Prefix), nil)
}

func attributeType(t topology.KeyType) awsdynamodb.AttributeType {
	if t == topology.KeyNumber {
		return awsdynamodb.AttributeType_NUMBER
	}
	return awsdynamodb.AttributeType_STRING
}

func attribute(k topology.Key) *awsdynamodb.Attribute {
	return &awsdynamodb.Attribute{Name: jsii.String(k.Name), Type: attributeType(k.Type)}
}

func (b *builder) addTable(t topology.Table) {
	props := &awsdynamodb.TableProps{
		TableName:    jsii.String(t.Name),
		PartitionKey: attribute(t.Partition),
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(b.cfg.deletionProtection),
		RemovalPolicy:      b.removal,
	}
	if t.Sort != nil {
		props.SortKey = attribute(*t.Sort)
	}
	if t.TTLAttribute != "" {
		props.TimeToLiveAttribute = jsii.String(t.TTLAttribute)
	}
	table := awsdynamodb.NewTable(b.scope, jsii.String(t.Logical), props)
	for _, ix := range t.Indexes {
		projection := awsdynamodb.ProjectionType_ALL
		if ix.KeysOnly {
			projection = awsdynamodb.ProjectionType_KEYS_ONLY
		}
		table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(ix.Name),
			PartitionKey:   attribute(ix.Partition),
			SortKey:        attribute(ix.Sort),
			ProjectionType: projection,
		})
	}
	b.tables[t.Logical] = table
}

// sqsActions are denied on every queue without TLS. They are listed rather
// than written as sqs:* because no statement of this stack may carry a
// wildcard action (see TestNoWildcardActions).
var sqsActions = []string{
	"sqs:AddPermission",
	"sqs:CancelMessageMoveTask",
	"sqs:ChangeMessageVisibility",
	"sqs:DeleteMessage",
	"sqs:DeleteQueue",
	"sqs:GetQueueAttributes",
	"sqs:GetQueueUrl",
	"sqs:ListDeadLetterSourceQueues",
	"sqs:ListMessageMoveTasks",
	"sqs:ListQueueTags",
	"sqs:PurgeQueue",
	"sqs:ReceiveMessage",
	"sqs:RemovePermission",
	"sqs:SendMessage",
	"sqs:SetQueueAttributes",
	"sqs:StartMessageMoveTask",
	"sqs:TagQueue",
	"sqs:UntagQueue",
}

func (b *builder) newQueue(logical, name string, props *awssqs.QueueProps) awssqs.Queue {
	props.QueueName = jsii.String(name)
	props.Encryption = awssqs.QueueEncryption_SQS_MANAGED
	// The queues are removed or kept as the tables are (QueueRemovalPolicy):
	// a deleted stack with deletion protection keeps the messages in
	// flight and in the DLQs.
	props.RemovalPolicy = b.cfg.queueRemoval
	q := awssqs.NewQueue(b.scope, jsii.String(logical), props)
	q.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("DenyInsecureTransport"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings(sqsActions...),
		Resources:  &[]*string{q.QueueArn()},
		Conditions: &map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
	}))
	return q
}

func (b *builder) addQueue(q topology.Queue) {
	dlq := b.newQueue(q.Logical+"DLQ", q.DLQName, &awssqs.QueueProps{
		RetentionPeriod: awscdk.Duration_Seconds(jsii.Number(q.DLQRetentionSeconds)),
	})
	queue := b.newQueue(q.Logical, q.Name, &awssqs.QueueProps{
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(b.cfg.visibility[q.Logical])),
		RetentionPeriod:   awscdk.Duration_Seconds(jsii.Number(q.RetentionSeconds)),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           dlq,
			MaxReceiveCount: jsii.Number(q.MaxReceiveCount),
		},
	})
	b.queues[q.Logical] = queue
	b.dlqs[q.Logical] = dlq
}

func (b *builder) addSecret(s secretSpec) {
	secret := awssecretsmanager.NewCfnSecret(b.scope, jsii.String(s.Logical), &awssecretsmanager.CfnSecretProps{
		Name:                 jsii.String(b.cfg.topo.Prefix + "/" + s.Stem),
		Description:          jsii.String(s.Description),
		GenerateSecretString: hexSecret,
		KmsKeyId:             b.keyArn(),
	})
	secret.ApplyRemovalPolicy(b.removal, nil)
	b.secrets[s.Logical] = secret
}

// env lists the variables of one function: only the resources it may use.
func (b *builder) env(dir string) map[string]*string {
	topo := b.cfg.topo
	env := map[string]*string{EnvEventBus: b.bus.EventBusName(), EnvDeployment: jsii.String(topo.Prefix)}
	switch dir {
	case "poller":
		env[EnvMonitorTable] = b.tables[topo.Monitor.Logical].TableName()
		env[EnvPollQueueURL] = b.queues[topo.PollQueue.Logical].QueueUrl()
		env[EnvQuarantineQueueURL] = b.quarantine.QueueUrl()
		env[EnvCMSBaseURL] = jsii.String(b.cfg.cmsBaseURL)
		// Always explicit (the failure budget, the backoff cap, the
		// retention, the sweep's grace), so the template states the outage
		// tolerance it was synthesized for; rendered by the poller's own
		// package (pollerconfig.Stack), which the simulation and the cost
		// benchmarks compare their poller with.
		for name, value := range b.cfg.pollerStack().Env() {
			env[name] = jsii.String(value)
		}
	case "coordinator":
		// The one definition of the coordinator's stack environment
		// (the simulation and the benchmarks load the same: config.
		// DeployedRelease); the tokens resolve at deploy.
		r := b.cfg.receiptIssuers
		for name, value := range coordinatorconfig.StackEnv(coordinatorconfig.StackResources{
			Deployment: topo.Prefix, EventBus: *b.bus.EventBusName(),
			ReleaseTable: *b.tables[topo.Release.Logical].TableName(), ReleaseQueueURL: *b.queues[topo.RelQueue.Logical].QueueUrl(),
			QuarantineQueueURL: *b.quarantine.QueueUrl(),
			CMSBaseURL:         b.cfg.cmsBaseURL, EvidenceBaseURL: b.cfg.evidenceBaseURL,
			TextRetention: b.cfg.textRetention, RecordRetention: b.cfg.monitorRetention,
			QualityIssuers: r.Quality, HumanReviewIssuers: r.HumanReview, IndependentReviewIssuers: r.IndependentReview,
		}) {
			env[name] = jsii.String(value)
		}
	case "health":
		env[EnvMonitorTable] = b.tables[topo.Monitor.Logical].TableName()
		env[EnvReleaseTable] = b.tables[topo.Release.Logical].TableName()
	}
	for _, s := range secretSpecs {
		for _, reader := range s.Readers {
			if reader == dir {
				env[s.Env] = b.secrets[s.Logical].Ref()
			}
		}
	}
	// The operator's settings, checked by the function's config loader.
	for name, value := range b.cfg.settings[dir] {
		env[name] = jsii.String(value)
	}
	return env
}

func (b *builder) addFunction(fc functionConfig) {
	logs := awslogs.NewLogGroup(b.scope, jsii.String(fc.Logical+"Logs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/" + fc.Name),
		Retention:     logRetention,
		RemovalPolicy: b.removal,
	})
	// A role of our own, with no managed policy: the log permissions are
	// scoped to this function's log group below.
	role := awsiam.NewRole(b.scope, jsii.String(fc.Logical+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("localeflow " + fc.Dir + " function"),
	})
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("WriteOwnLogs"),
		Actions:   jsii.Strings("logs:CreateLogStream", "logs:PutLogEvents"),
		Resources: &[]*string{logs.LogGroupArn()},
	}))
	props := &awslambda.FunctionProps{
		FunctionName: jsii.String(fc.Name),
		Description:  jsii.String("localeflow " + fc.Dir),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(b.cfg.assetDir, fc.Dir)), nil),
		MemorySize:   jsii.Number(fc.MemoryMB),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(fc.TimeoutSeconds)),
		Role:         role,
		LogGroup:     logs,
		// JSON platform lines (START, REPORT) next to the functions' own
		// JSON lines: one format for Logs Insights.
		LoggingFormat: awslambda.LoggingFormat_JSON,
		Environment:   &map[string]*string{},
		// Active X-Ray tracing: the runtime hands each invocation its trace
		// header, which the functions log (xray_trace_id) and propagate on
		// the CMS and evidence requests (docs/design.md "Tracing").
		Tracing: awslambda.Tracing_ACTIVE,
	}
	b.stackEnv[fc.Dir] = b.env(fc.Dir)
	for k, v := range b.stackEnv[fc.Dir] {
		(*props.Environment)[k] = v
	}
	if fc.ReservedConcurrency > 0 {
		props.ReservedConcurrentExecutions = jsii.Number(fc.ReservedConcurrency)
	}
	if h := b.cfg.host; h.Vpc != nil {
		props.Vpc = h.Vpc
		props.VpcSubnets = h.VpcSubnets
		if len(h.SecurityGroups) > 0 {
			props.SecurityGroups = &h.SecurityGroups
		}
		allowVpcNetworkInterfaces(role)
	}
	fn := awslambda.NewFunction(b.scope, jsii.String(fc.Logical), props)
	// Scheduled invocations are sweeps: a failed one is simply redone by the
	// next tick, so asynchronous retries would only duplicate work.
	fn.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(0),
		MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(5)),
	})
	if fc.Queue != "" {
		q, _ := b.cfg.topo.QueueByLogical(fc.Queue)
		fn.AddEventSource(awslambdaeventsources.NewSqsEventSource(b.queues[fc.Queue], &awslambdaeventsources.SqsEventSourceProps{
			BatchSize:               jsii.Number(q.BatchSize),
			ReportBatchItemFailures: jsii.Bool(true),
			MaxConcurrency:          jsii.Number(fc.MaxConcurrency),
		}))
	}
	// The final environment (with whatever the app adds after New) is
	// checked at synth by the function's own config loader.
	fn.Node().AddValidation(&envCheck{fn: fn, dir: fc.Dir, cfg: b.cfg, set: b.stackEnv[fc.Dir]})
	b.functions[fc.Dir] = fn
	b.roles[fc.Dir] = role
}

func (b *builder) addRule(r topology.Rule) {
	pattern := r.EventPattern()
	queue := b.queues[r.TargetQueue]
	maxAge, attempts := b.inputTargetRetry()
	awsevents.NewRule(b.scope, jsii.String(r.Logical), &awsevents.RuleProps{
		RuleName:     jsii.String(r.Name),
		Description:  jsii.String("route input events to the " + r.TargetQueue),
		EventBus:     b.bus,
		EventPattern: b.cfg.inputPattern(pattern["detail-type"].([]string)),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewSqsQueue(queue, &awseventstargets.SqsQueueProps{
			DeadLetterQueue: b.eventDLQ, MaxEventAge: maxAge, RetryAttempts: attempts,
		})},
	})
}

// inputPattern matches the input events of detailTypes meant for this
// deployment. On its own bus every localeflow event is; on a host bus
// (HostProps.EventBus), which other deployments may share, only events
// whose `resources` carry contract.DeploymentResource(prefix): two
// deployments on one bus then never route each other's inputs (each would
// quarantine the other's events, signed with another key).
func (c stackConfig) inputPattern(detailTypes []string) *awsevents.EventPattern {
	p := &awsevents.EventPattern{
		Source:     jsii.Strings(contract.EventSource),
		DetailType: jsii.Strings(detailTypes...),
	}
	if c.host.EventBus != nil {
		p.Resources = jsii.Strings(contract.DeploymentResource(c.topo.Prefix))
	}
	return p
}

func (b *builder) addSchedule(s topology.Schedule) {
	fn := b.functions[s.Function]
	awsevents.NewRule(b.scope, jsii.String(s.Logical), &awsevents.RuleProps{
		RuleName:    jsii.String(s.Name),
		Description: jsii.String(fmt.Sprintf("run the %s every %d min", s.Function, s.RateMinutes)),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(s.RateMinutes))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fn, &awseventstargets.LambdaFunctionProps{
			MaxEventAge:     awscdk.Duration_Minutes(jsii.Number(s.RateMinutes)),
			RetryAttempts:   jsii.Number(2),
			DeadLetterQueue: b.eventDLQ,
		})},
	})
}

// Alarm periods and thresholds.
const (
	alarmPeriodMinutes = 5
	// oldestMessageAlarmSeconds: a message older than this in a work queue
	// means its consumer is not keeping up (a delayed message waits at
	// most 15 min per hop, so a healthy queue stays far below).
	oldestMessageAlarmSeconds = 3600
)

// metricOptions is a CloudWatch statistic over minutes.
func metricOptions(statistic string, minutes float64) *awscloudwatch.MetricOptions {
	return &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(minutes)), Statistic: jsii.String(statistic)}
}

// customMetric is one of the functions' EMF metrics of this deployment:
// every series carries the Deployment dimension = the prefix.
func (b *builder) customMetric(name string, dims map[string]string, statistic string, minutes float64) awscloudwatch.Metric {
	d := map[string]*string{DeploymentDimension: jsii.String(b.cfg.topo.Prefix)}
	for k, v := range dims {
		d[k] = jsii.String(v)
	}
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(HealthMetricNamespace),
		MetricName:    jsii.String(name),
		DimensionsMap: &d,
		Period:        awscdk.Duration_Minutes(jsii.Number(minutes)),
		Statistic:     jsii.String(statistic),
	})
}

func (b *builder) addOutputs() {
	topo := b.cfg.topo
	out := func(id string, v *string) {
		awscdk.NewCfnOutput(b.scope, jsii.String(id), &awscdk.CfnOutputProps{Value: v})
	}
	out("HealthUrl", b.healthURL.Url())
	out("EventBusName", b.bus.EventBusName())
	out("MonitorTableName", b.tables[topo.Monitor.Logical].TableName())
	out("ReleaseTableName", b.tables[topo.Release.Logical].TableName())
	out("PollQueueUrl", b.queues[topo.PollQueue.Logical].QueueUrl())
	out("ReleaseQueueUrl", b.queues[topo.RelQueue.Logical].QueueUrl())
	out("QuarantineQueueUrl", b.quarantine.QueueUrl())
	awscdk.NewCfnOutput(b.scope, jsii.String("CmsOutageToleranceSeconds"), &awscdk.CfnOutputProps{
		Value:       jsii.String(fmt.Sprint(int64(b.cfg.OutageTolerance() / time.Second))),
		Description: jsii.String(b.cfg.OutageToleranceLine()),
	})
	for _, s := range secretSpecs {
		out(s.Logical+"Arn", b.secrets[s.Logical].Ref())
	}
}
