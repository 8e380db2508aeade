package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/topology"
)

// The exact actions each function gets. They are written out instead of
// using CDK's grant helpers (grantReadWriteData and friends add actions the
// functions never call, such as Scan, BatchWriteItem and DeleteItem).
var (
	// pollerMonitorActions: what adapters/monitordb does for the poller:
	// register (PutItem, conditional), claim/complete/retry/fail and marking
	// invalid records (UpdateItem, conditional), status reads (GetItem).
	pollerMonitorActions = []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}
	// coordinatorReleaseActions: adapters/releasedb loads an event's item
	// collection with one Query and writes every state change as a PutItem
	// conditional on the version read.
	coordinatorReleaseActions = []string{"dynamodb:PutItem", "dynamodb:Query"}
	// queryAction reads an index (due discovery, attention lists).
	queryAction = []string{"dynamodb:Query"}
	// healthTableActions are read-only: the census queries the sparse
	// indexes, then reads the items by key (GetItem, BatchGetItem).
	healthTableActions = []string{"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:Query"}
	// healthCountAction: counts.terminal is DescribeTable's approximate
	// ItemCount of the monitor table minus the records the census read
	// (adapters/healthdb TableItems), so terminal items are never read.
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
	b.allow("poller", "MonitorWakeIndex", queryAction, indexArn(monitor, topology.IndexWake))
	b.allow("poller", "PollQueueSend", sendAction, b.queues[topo.PollQueue.Logical].QueueArn())
	b.allow("poller", "PublishEvents", putEvents, busArn...)

	b.allow("coordinator", "ReleaseItems", coordinatorReleaseActions, release.TableArn())
	b.allow("coordinator", "ReleaseWakeIndex", queryAction, indexArn(release, topology.IndexWake))
	b.allow("coordinator", "ReleaseOutboxIndex", queryAction, indexArn(release, topology.IndexOutbox))
	b.allow("coordinator", "ReleaseQueueSend", sendAction, b.queues[topo.RelQueue.Logical].QueueArn())
	b.allow("coordinator", "PublishEvents", putEvents, busArn...)

	var tables, indexes []*string
	for _, t := range topo.Tables() {
		table := b.tables[t.Logical]
		tables = append(tables, table.TableArn())
		for _, ix := range t.Indexes {
			indexes = append(indexes, indexArn(table, ix.Name))
		}
	}
	b.allow("health", "ReadTables", healthTableActions, tables...)
	b.allow("health", "CountMonitorItems", healthCountAction, monitor.TableArn())
	b.allow("health", "QueryIndexes", queryAction, indexes...)
	b.allow("health", "PublishEvents", putEvents, busArn...)

	for _, s := range secretSpecs {
		for _, reader := range s.Readers {
			b.allow(reader, "Read"+s.Logical, getSecretValue, b.secrets[s.Logical].Ref())
		}
	}
}

func (b *builder) allow(dir, sid string, actions []string, resources ...*string) {
	b.roles[dir].AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String(sid),
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}))
}

func indexArn(t awsdynamodb.Table, index string) *string {
	return jsii.String(*t.TableArn() + "/index/" + index)
}
