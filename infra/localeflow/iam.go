package localeflow

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/topology"
)

// The exact actions each function gets. They are written out instead of
// using CDK's grant helpers (grantReadWriteData and friends add actions the
// functions never call, such as Scan, BatchWriteItem and DeleteItem).
var (
	// pollerMonitorActions: what adapters/monitordb does for the poller:
	// register (PutItem, conditional), claim/complete/retry/fail and marking
	// invalid records (UpdateItem, conditional), status reads (GetItem),
	// and the sweep's owed pass, which reads the wake index's entries a
	// page at a time (BatchGetItem, projected).
	pollerMonitorActions = []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}
	// coordinatorReleaseActions: adapters/releasedb loads an event's item
	// collection with one Query and writes every state change as a PutItem
	// conditional on the version read.
	coordinatorReleaseActions = []string{"dynamodb:PutItem", "dynamodb:Query"}
	// pollerVerifyAction: at cold start the poller checks the monitor
	// table's key schema and indexes (monitordb.Verify).
	pollerVerifyAction = []string{"dynamodb:DescribeTable"}
	// queryAction reads an index (due discovery, attention lists).
	queryAction = []string{"dynamodb:Query"}
	// healthTableActions are read-only: the census queries the sparse
	// indexes (queryAction on the index ARNs), then reads the items they
	// list by key with BatchGetItem. It never calls GetItem or queries a
	// base table.
	healthTableActions = []string{"dynamodb:BatchGetItem"}
	// healthCountAction: counts.terminal is DescribeTable's approximate
	// ItemCount of the monitor table minus the records the census read
	// (adapters/opsdb TableItems), so terminal items are never read.
	healthCountAction = []string{"dynamodb:DescribeTable"}
	// sendAction lets a consumer schedule its own delayed follow-up
	// messages; the receive/delete/visibility actions come from the event
	// source mapping's grant.
	sendAction     = []string{"sqs:SendMessage"}
	putEvents      = []string{"events:PutEvents"}
	getSecretValue = []string{"secretsmanager:GetSecretValue"}
)

// grant attaches every function's permissions to its own role.
func (b *builder) grant() {
	topo := b.cfg.topo
	monitor := b.tables[topo.Monitor.Logical]
	release := b.tables[topo.Release.Logical]
	busArn := []*string{b.bus.EventBusArn()}

	b.allow("poller", "MonitorItems", pollerMonitorActions, monitor.TableArn())
	b.allow("poller", "VerifyMonitorTable", pollerVerifyAction, monitor.TableArn())
	b.allow("poller", "MonitorWakeIndex", queryAction, indexArn(monitor, topology.IndexWake))
	b.allow("poller", "PollQueueSend", sendAction, b.queues[topo.PollQueue.Logical].QueueArn())
	b.allow("poller", "QuarantineSend", sendAction, b.quarantine.QueueArn())

	b.allow("coordinator", "ReleaseItems", coordinatorReleaseActions, release.TableArn())
	// Text retention: the coordinator may UpdateItem only the TTL attribute
	// (adapters/releasedb TextExpirer), never a record's content; the
	// condition reads the item's schema_version.
	b.allowIf("coordinator", "ExpireReleaseTexts", []string{"dynamodb:UpdateItem"}, map[string]any{
		"ForAllValues:StringEquals": map[string]any{"dynamodb:Attributes": []string{topology.AttrPK, topology.AttrSK, topology.AttrExpiresAt, "schema_version"}},
		"StringEqualsIfExists":      map[string]any{"dynamodb:ReturnValues": "NONE"},
	}, release.TableArn())
	b.allow("coordinator", "ReleaseWakeIndex", queryAction, indexArn(release, topology.IndexWake))
	b.allow("coordinator", "ReleaseQueueSend", sendAction, b.queues[topo.RelQueue.Logical].QueueArn())
	b.allow("coordinator", "QuarantineSend", sendAction, b.quarantine.QueueArn())

	// The health census reads only what it reports: index queries project
	// onto the table keys (Select SPECIFIC_ATTRIBUTES, required), item
	// reads onto the records' content-free attributes. The conditions
	// (dynamodb:Attributes) enforce the projections adapters/monitordb and
	// adapters/opsdb make; health reads no wake or outbox index.
	b.allowIf("health", "ReadMonitorItems", healthTableActions, onlyAttributes(topology.MonitorCensusAttributes, false), monitor.TableArn())
	// The release census cannot read source or result texts.
	b.allowIf("health", "ReadReleaseItems", healthTableActions, onlyAttributes(topology.ReleaseCensusAttributes, false), release.TableArn())
	b.allow("health", "CountMonitorItems", healthCountAction, monitor.TableArn())
	b.allowIf("health", "QueryMonitorIndexes", queryAction, onlyAttributes(topology.MonitorIndexQueryAttributes, true),
		indexArn(monitor, topology.IndexWake), indexArn(monitor, topology.IndexAttention))
	b.allowIf("health", "QueryReleaseIndexes", queryAction, onlyAttributes(topology.ReleaseIndexQueryAttributes, true),
		indexArn(release, topology.IndexWake), indexArn(release, topology.IndexAttention))
	// Each function may put only the detail-types it emits, with the
	// localeflow source: none can publish a dispatch, plan or job event.
	for _, fn := range topo.Functions {
		b.allowIf(fn.Dir, "PublishEvents", putEvents, map[string]any{
			"StringEquals": map[string]any{
				"events:source":      contract.EventSource,
				"events:detail-type": fn.Emits,
			},
		}, busArn...)
	}

	for _, s := range secretSpecs {
		for _, reader := range s.Readers {
			b.allow(reader, "Read"+s.Logical, getSecretValue, b.secrets[s.Logical].Ref())
		}
	}
	b.grantKey()
}

// Uses of the customer-managed data key, each only through the service
// that needs it (kms:ViaService).
var (
	// queueKeyActions: an SQS producer needs GenerateDataKey and Decrypt
	// (to reuse the queue's data key), a consumer Decrypt.
	queueKeyActions = []string{"kms:Decrypt", "kms:GenerateDataKey"}
	// secretKeyActions: GetSecretValue of a secret encrypted with the key.
	secretKeyActions = []string{"kms:Decrypt"}
	// tableReadKeyActions / tableWriteKeyActions: DynamoDB decrypts the
	// table key for reads and writes; writes may need a new data key.
	tableReadKeyActions  = []string{"kms:Decrypt"}
	tableWriteKeyActions = []string{"kms:Decrypt", "kms:GenerateDataKey"}
)

// grantKey lets each function use the data key exactly as far as its
// encrypted resources need: the poller sends to the quarantine queue and
// reads its secrets; the coordinator consumes and sends to the release
// queue, sends to the quarantine queue, reads and writes the release table
// and reads its secrets; health reads the release table.
func (b *builder) grantKey() {
	key := b.keyArn()
	if key == nil {
		return
	}
	b.allowIf("poller", "QueueDataKey", queueKeyActions, kmsVia("sqs"), key)
	b.allowIf("poller", "SecretsDataKey", secretKeyActions, kmsVia("secretsmanager"), key)
	b.allowIf("coordinator", "QueueDataKey", queueKeyActions, kmsVia("sqs"), key)
	b.allowIf("coordinator", "SecretsDataKey", secretKeyActions, kmsVia("secretsmanager"), key)
	b.allowIf("coordinator", "ReleaseTableDataKey", tableWriteKeyActions, kmsVia("dynamodb"), key)
	b.allowIf("health", "ReleaseTableDataKey", tableReadKeyActions, kmsVia("dynamodb"), key)
}

func (b *builder) allow(dir, sid string, actions []string, resources ...*string) {
	b.roles[dir].AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String(sid),
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}))
}

// allowIf is allow with an IAM condition block.
func (b *builder) allowIf(dir, sid string, actions []string, conditions map[string]any, resources ...*string) {
	b.roles[dir].AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String(sid),
		Effect:     awsiam.Effect_ALLOW,
		Actions:    jsii.Strings(actions...),
		Resources:  &resources,
		Conditions: &conditions,
	}))
}

// onlyAttributes is the condition of a projected read: every attribute the
// request names is in attrs, and Select is SPECIFIC_ATTRIBUTES (required
// when selectRequired, as for Query, which sets it; BatchGetItem has no
// Select).
func onlyAttributes(attrs []string, selectRequired bool) map[string]any {
	sel := "StringEqualsIfExists"
	if selectRequired {
		sel = "StringEquals"
	}
	return map[string]any{
		"ForAllValues:StringEquals": map[string]any{"dynamodb:Attributes": attrs},
		sel:                         map[string]any{"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
	}
}

func indexArn(t awsdynamodb.Table, index string) *string {
	return jsii.String(*t.TableArn() + "/index/" + index)
}
