package monitordb

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

// newTable creates a fresh monitor table (only the table: these tests need
// no queues) as topology defines it, and deletes it when t ends. It returns
// the client and the table name.
func newTable(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	db, spec := localtest.Table(t, func(topo topology.Topology) topology.Table { return topo.Monitor })
	return db, spec.Name
}
