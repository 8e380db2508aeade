package localeflow

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"

	"github.com/localeflow/localeflow/topology"
)

// Localeflow is one deployment built by New: the construct that holds every
// resource, and the resources a team wires its own stack to.
//
// The functions already have every permission they need; grant further
// access (an operator role reading the health URL, a producer putting
// events on the bus) with the L2 grant methods, e.g.
// HealthURL.GrantInvokeUrl(role) or EventBus.GrantPutEventsTo(role, nil).
type Localeflow struct {
	constructs.Construct

	// Topology names every resource (tables, indexes, queues, rules,
	// schedules, functions) of the deployment's prefix.
	Topology topology.Topology

	// MonitorTable holds the lifecycle monitor's records (ids, states and
	// hashes only); ReleaseTable the release coordinator's records and the
	// texts it releases.
	MonitorTable awsdynamodb.Table
	ReleaseTable awsdynamodb.Table

	// PollQueue feeds the poller and ReleaseQueue the coordinator; each
	// has its DLQ. QuarantineQueue keeps the messages either consumer
	// rejects for good (it has no consumer).
	PollQueue       awssqs.Queue
	PollDLQ         awssqs.Queue
	ReleaseQueue    awssqs.Queue
	ReleaseDLQ      awssqs.Queue
	QuarantineQueue awssqs.Queue

	// EventBus carries the input events (routed by rules to the queues)
	// and the events the functions emit.
	EventBus awsevents.IEventBus
	// EventDLQ keeps the events EventBridge could not deliver to a rule's
	// target; EventArchive keeps the input events for replay.
	EventDLQ     awssqs.Queue
	EventArchive awsevents.Archive

	// Poller, Coordinator and Health are the three functions.
	Poller      awslambda.Function
	Coordinator awslambda.Function
	Health      awslambda.Function
	// HealthURL is the health function's URL (AWS_IAM auth).
	HealthURL awslambda.FunctionUrl

	// The key secrets (64 hex digits generated at deploy, replaced by the
	// operator with put-secret-value).
	CMSKeySecret         awssecretsmanager.CfnSecret
	EventKeySecret       awssecretsmanager.CfnSecret
	EvidenceKeySecret    awssecretsmanager.CfnSecret
	ApprovalKeySecret    awssecretsmanager.CfnSecret
	PublicationKeySecret awssecretsmanager.CfnSecret
	// The public keys of the two Ed25519 sets (hex, the signing key first),
	// written by the coordinator at cold start; `localeflow keys` reads
	// them (GetSecretValue), never the seeds (publickeys.go).
	ApprovalPublicKeySecret    awssecretsmanager.CfnSecret
	PublicationPublicKeySecret awssecretsmanager.CfnSecret

	// DataKey is the customer-managed KMS key of the release table, the
	// release queue and its DLQ, the quarantine queue and the key secrets;
	// nil when Props.CustomerManagedKey is false or HostProps.DataKey is
	// given (DataKeyL2 is then the host's key).
	DataKey awskms.CfnKey

	// Alarms all notify AlarmTopic: the topic the construct created
	// (<prefix>-alarms), or the imported Props.AlarmTopicArn.
	Alarms     []awscloudwatch.Alarm
	AlarmTopic awssns.ITopic
	// TicketTopic receives the ticket-severity alarms (AlarmTopic the
	// page-severity ones).
	TicketTopic awssns.ITopic
	// Dashboard is the on-call view (<prefix>-operations).
	Dashboard awscloudwatch.Dashboard

	cfg stackConfig
	// keyPolicy is DataKey's policy; hostKey is HostProps.DataKey.
	keyPolicy awsiam.PolicyDocument
	hostKey   awskms.IKey
	// stackEnv is each function's environment as the construct set it.
	stackEnv map[string]map[string]*string
	// crossAccount numbers the cross-account statements (their Sids);
	// secretPolicies are the secrets' resource policies (GrantSecretRead).
	crossAccount   int
	secretPolicies map[string]awsiam.PolicyDocument
	// The L2 views made on first use (Secrets, DataKeyL2).
	secretsL2 map[string]awssecretsmanager.ISecret
	dataKeyL2 awskms.IKey
}

// construct is the builder's result.
func (b *builder) construct() *Localeflow {
	topo := b.cfg.topo
	return &Localeflow{
		Construct:                  b.scope,
		Topology:                   topo,
		MonitorTable:               b.tables[topo.Monitor.Logical],
		ReleaseTable:               b.tables[topo.Release.Logical],
		PollQueue:                  b.queues[topo.PollQueue.Logical],
		PollDLQ:                    b.dlqs[topo.PollQueue.Logical],
		ReleaseQueue:               b.queues[topo.RelQueue.Logical],
		ReleaseDLQ:                 b.dlqs[topo.RelQueue.Logical],
		QuarantineQueue:            b.quarantine,
		EventBus:                   b.bus,
		EventDLQ:                   b.eventDLQ,
		EventArchive:               b.archive,
		Poller:                     b.functions["poller"],
		Coordinator:                b.functions["coordinator"],
		Health:                     b.functions["health"],
		HealthURL:                  b.healthURL,
		CMSKeySecret:               b.secrets["CMSKeySecret"],
		EventKeySecret:             b.secrets["EventKeySecret"],
		EvidenceKeySecret:          b.secrets["EvidenceKeySecret"],
		ApprovalKeySecret:          b.secrets["ApprovalKeySecret"],
		PublicationKeySecret:       b.secrets["PublicationKeySecret"],
		ApprovalPublicKeySecret:    b.secrets["ApprovalPublicKeySecret"],
		PublicationPublicKeySecret: b.secrets["PublicationPublicKeySecret"],
		DataKey:                    b.key,
		keyPolicy:                  b.keyPolicy,
		hostKey:                    b.hostKey,
		stackEnv:                   b.stackEnv,
		Alarms:                     b.alarms,
		AlarmTopic:                 b.topic,
		TicketTopic:                b.ticketTopic,
		Dashboard:                  b.dashboard,
		cfg:                        b.cfg,
	}
}

// Stack is the stack the construct is in.
func (l *Localeflow) Stack() awscdk.Stack { return awscdk.Stack_Of(l.Construct) }

// OutageTolerance is the longest CMS outage a change survives with the
// poller settings of the props.
func (l *Localeflow) OutageTolerance() time.Duration { return l.cfg.OutageTolerance() }

// OutageToleranceLine states OutageTolerance and the settings it comes
// from (`make synth` prints it).
func (l *Localeflow) OutageToleranceLine() string { return l.cfg.OutageToleranceLine() }

// EncryptionLine says whether the customer-managed key is on and what it
// encrypts (`make synth` prints it).
func (l *Localeflow) EncryptionLine() string { return l.cfg.EncryptionLine() }

// AlarmsLine says which SNS topic the alarms notify (`make synth` prints
// it).
func (l *Localeflow) AlarmsLine() string { return l.cfg.AlarmsLine() }
