package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/memstore"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/dynamofake"
	pollerconfig "github.com/localeflow/localeflow/functions/poller/config"
	"github.com/localeflow/localeflow/topology"
)

// The stores behind the gated ports. By default the memory stores
// (memstore, releasetest.MemStore); with Options.Adapters the real
// DynamoDB adapters (adapters/monitordb, adapters/releasedb) on the
// in-memory DynamoDB (dev/dynamofake), whose every SDK call is a call
// boundary of its own.

// monitorBacking is what the simulation needs of a monitor store: the port
// and a way to edit a record behind the service's back.
type monitorBacking interface {
	monitor.Store
	Tamper(eventID string, edit func(*monitor.Record)) bool
}

// releaseBacking is the release store with its index readers.
type releaseBacking interface {
	release.Store
	release.DueFinder
}

// adapterWorld is the DynamoDB of a run on the adapters.
type adapterWorld struct {
	db   *dynamofake.DB
	topo topology.Topology
}

func (w *World) useAdapters() {
	topo := topology.New("sim")
	w.ddb = &adapterWorld{db: dynamofake.New(topo.Monitor, topo.Release), topo: topo}
}

func (w *World) newMonitorBacking() (monitorBacking, error) {
	if w.ddb == nil {
		return memstore.New(), nil
	}
	s, err := monitordb.New(&gatedDB{w: w, db: w.ddb.db}, w.ddb.topo.Monitor.Name)
	if err != nil {
		return nil, err
	}
	// The store writes what the deployed poller's does: finished records
	// with their expires_at (the stack's retention, pollerConfig).
	return &tamperableMonitorDB{Store: s.WithRetention(pollerconfig.DefaultStack().Retention), db: w.ddb.db, table: w.ddb.topo.Monitor.Name}, nil
}

func (w *World) newReleaseBacking() releaseBacking {
	if w.ddb == nil {
		return releasetest.NewMemStore()
	}
	return releasedb.New(&gatedDB{w: w, db: w.ddb.db}, w.ddb.topo.Release.Name)
}

// tamperableMonitorDB edits a stored item directly in the fake, bypassing
// every condition, as an operator's console edit would.
type tamperableMonitorDB struct {
	*monitordb.Store
	db    *dynamofake.DB
	table string
}

func (t *tamperableMonitorDB) Tamper(eventID string, edit func(*monitor.Record)) bool {
	item := t.db.Raw(t.table, monitordb.Key(eventID))
	if item == nil {
		return false
	}
	rec := monitordb.RecordOf(item)
	edit(&rec)
	av, err := monitordb.ItemOf(rec)
	if err != nil {
		return false
	}
	return t.db.SetRaw(t.table, av) == nil
}

// gatedDB is the adapters' DynamoDB client. The reads that one port call
// makes many of — Query (a due page is 16 shard Queries, a collection or a
// census paginates) and BatchGetItem — are call boundaries of their own:
// each waits for the scheduler (other invocations' writes interleave with
// one page read) and may fail before it takes effect. The single-item
// calls (GetItem, PutItem, UpdateItem, TransactWriteItems: each port write
// of the adapters is exactly one of them) run within their port call's
// turn, as the memory stores do: the port boundary (World.do) injects
// their faults, ambiguous outcomes and crashes, and its lease and outcome
// checks see each write atomically with the history they keep.
type gatedDB struct {
	w  *World
	db *dynamofake.DB
}

// sdkFailShare is the part of the store's fault rate each gated SDK call
// gets (a port call of the adapters makes up to 2×16 Queries).
const sdkFailShare = 0.25

func (g *gatedDB) do(ctx context.Context, op, what string, gated bool, effect func() (string, error)) error {
	w := g.w
	inv := invocationOf(ctx)
	if inv == nil || !gated {
		_, err := effect()
		return err
	}
	if inv.crashed.Load() {
		return w.afterCrash(inv)
	}
	name := "ddb." + op + " " + what
	w.gate(inv, name)
	if inv.crashed.Load() {
		return w.afterCrash(inv)
	}
	if w.faultsOn() && w.chance(w.Faults.Fail[KindStore]*sdkFailShare) {
		w.record(inv, name, "injected failure")
		return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op,
			Err: &types.InternalServerError{Message: aws.String(errInjected.Error())}}
	}
	outcome, err := effect()
	if err != nil {
		outcome = "error " + errText(err)
	}
	w.record(inv, name, outcome)
	return err
}

func keyText(key map[string]types.AttributeValue) string {
	var parts []string
	for _, k := range []string{topology.AttrEventID, topology.AttrPK, topology.AttrSK} {
		switch v := key[k].(type) {
		case *types.AttributeValueMemberS:
			parts = append(parts, v.Value)
		case *types.AttributeValueMemberN:
			parts = append(parts, k+"="+v.Value)
		}
	}
	return strings.Join(parts, " ")
}

func tableText(name *string) string {
	if strings.Contains(aws.ToString(name), "elease") {
		return "release"
	}
	return "monitor"
}

func (g *gatedDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opt ...func(*dynamodb.Options)) (out *dynamodb.GetItemOutput, err error) {
	err = g.do(ctx, "GetItem", tableText(in.TableName)+" "+keyText(in.Key), false, func() (string, error) {
		var e error
		out, e = g.db.GetItem(ctx, in, opt...)
		if e != nil {
			return "", e
		}
		return fmt.Sprintf("found=%v", len(out.Item) > 0), nil
	})
	return out, err
}

func (g *gatedDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (out *dynamodb.PutItemOutput, err error) {
	err = g.do(ctx, "PutItem", tableText(in.TableName)+" "+keyText(in.Item), false, func() (string, error) {
		var e error
		out, e = g.db.PutItem(ctx, in, opt...)
		return "put", e
	})
	return out, err
}

func (g *gatedDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (out *dynamodb.UpdateItemOutput, err error) {
	err = g.do(ctx, "UpdateItem", tableText(in.TableName)+" "+keyText(in.Key), false, func() (string, error) {
		var e error
		out, e = g.db.UpdateItem(ctx, in, opt...)
		return "updated", e
	})
	return out, err
}

func (g *gatedDB) Query(ctx context.Context, in *dynamodb.QueryInput, opt ...func(*dynamodb.Options)) (out *dynamodb.QueryOutput, err error) {
	what := tableText(in.TableName) + " " + aws.ToString(in.IndexName)
	// The string values sorted (map order is not stable: a release
	// state read names its partition and its sort key bound).
	var strs []string
	for _, v := range in.ExpressionAttributeValues {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			strs = append(strs, s.Value)
		}
	}
	slices.Sort(strs)
	for _, v := range strs {
		what += " " + v
	}
	// The shard (the first number of the key condition's values is not
	// ordered): name it by the values, sorted, so concurrent shard reads
	// of one invocation have distinct, stable names.
	var nums []string
	for _, v := range in.ExpressionAttributeValues {
		if n, ok := v.(*types.AttributeValueMemberN); ok {
			nums = append(nums, n.Value)
		}
	}
	slices.Sort(nums)
	what += " " + strings.Join(nums, ",")
	if len(in.ExclusiveStartKey) > 0 {
		what += " after " + keyText(in.ExclusiveStartKey)
		for _, k := range []string{topology.AttrWakeMS, topology.AttrOutboxMS, topology.AttrAttentionMS} {
			if v, ok := in.ExclusiveStartKey[k].(*types.AttributeValueMemberN); ok {
				what += " " + k + "=" + v.Value
			}
		}
	}
	err = g.do(ctx, "Query", what, true, func() (string, error) {
		var e error
		out, e = g.db.Query(ctx, in, opt...)
		if e != nil {
			return "", e
		}
		return fmt.Sprintf("%d items, more=%v", len(out.Items), len(out.LastEvaluatedKey) > 0), nil
	})
	return out, err
}

func (g *gatedDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opt ...func(*dynamodb.Options)) (out *dynamodb.BatchGetItemOutput, err error) {
	n := 0
	for _, ka := range in.RequestItems {
		n += len(ka.Keys)
	}
	err = g.do(ctx, "BatchGetItem", fmt.Sprintf("%d keys", n), true, func() (string, error) {
		var e error
		out, e = g.db.BatchGetItem(ctx, in, opt...)
		return "read", e
	})
	return out, err
}

func (g *gatedDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opt ...func(*dynamodb.Options)) (out *dynamodb.TransactWriteItemsOutput, err error) {
	var keys []string
	for _, ti := range in.TransactItems {
		if ti.Put != nil {
			keys = append(keys, keyText(ti.Put.Item))
		}
	}
	err = g.do(ctx, "TransactWriteItems", strings.Join(keys, " + "), false, func() (string, error) {
		var e error
		out, e = g.db.TransactWriteItems(ctx, in, opt...)
		return "written", e
	})
	return out, err
}

var (
	_ monitordb.DynamoDBAPI = (*gatedDB)(nil)
	_ releasedb.DynamoDBAPI = (*gatedDB)(nil)
)
