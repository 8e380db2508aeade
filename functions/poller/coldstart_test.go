package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/bootstrap"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

// TestIntegrationColdStartVerifiesMonitorTable: a poller pointed at a
// table without the topology's indexes (here: one lacking the attention
// index) fails at cold start with schema_altered; the topology's
// table passes.
func TestIntegrationColdStartVerifiesMonitorTable(t *testing.T) {
	db, good := localtest.Table(t, func(topo topology.Topology) topology.Table { return topo.Monitor })
	ctx := context.Background()
	old := good
	old.Name = good.Name + "-old"
	old.Indexes = nil
	for _, ix := range good.Indexes {
		if ix.Name != topology.IndexAttention {
			old.Indexes = append(old.Indexes, ix)
		}
	}
	if _, err := db.CreateTable(ctx, bootstrap.CreateTableInput(old)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(old.Name)}); err != nil {
			t.Errorf("delete %s: %v", old.Name, err)
		}
	})
	env := baseEnv()
	getenv := func(k string) string { return env[k] }
	log := slog.New(slog.DiscardHandler)

	env[envMonitorTable] = good.Name
	if h, err := coldStart(ctx, getenv, log); err != nil || h == nil {
		t.Fatalf("cold start on the topology's table: %v", err)
	}
	env[envMonitorTable] = old.Name
	if _, err := coldStart(ctx, getenv, log); !core.HasCode(err, monitor.CodeSchemaAltered) {
		t.Fatalf("cold start on a table without the attention index = %v, want %s", err, monitor.CodeSchemaAltered)
	}
	env[envMonitorTable] = good.Name + "-missing"
	if _, err := coldStart(ctx, getenv, log); err == nil {
		t.Fatal("cold start on a missing table succeeded")
	}
}
