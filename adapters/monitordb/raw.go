package monitordb

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core/monitor"
)

// ItemOf is the item Create writes for rec (its index keys derived from
// it); RecordOf reads an item as Get does (Corrupt when it does not decode
// or its index keys disagree). For tests and the simulation, which edit
// stored items behind the store's back as an operator or another writer
// would.
func ItemOf(rec monitor.Record) (map[string]types.AttributeValue, error) { return encode(rec) }

// RecordOf: see ItemOf.
func RecordOf(item map[string]types.AttributeValue) monitor.Record { return decode(item) }

// Key is the table key of the record of eventID.
func Key(eventID string) map[string]types.AttributeValue { return key(eventID) }
