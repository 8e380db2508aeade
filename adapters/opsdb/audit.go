package opsdb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// CodeReleaseRecordInvalid is the audit code of a release item of another
// kind (plan, job, source, result, approval) that does not decode, or that
// carries index keys it must not have.
const CodeReleaseRecordInvalid = release.CodeRecordInvalid

// DynamoDBScanAPI is the part of *dynamodb.Client the audit uses.
type DynamoDBScanAPI interface {
	Scan(ctx context.Context, params *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ DynamoDBScanAPI = (*dynamodb.Client)(nil)

// Auditor checks every record of both tables. It is the one place that
// scans, and it runs only when an operator asks (localeflow audit).
type Auditor struct {
	db           DynamoDBScanAPI
	monitor      *monitordb.Store
	monitorTable string
	releaseTable string
	// Segments of the parallel Scan of each table.
	Segments int
	// Readers bounds the concurrent consistent reads of monitor records.
	Readers int
}

// NewAuditor returns an Auditor of the two tables; store reads monitor
// records (so they are decoded exactly as the monitor decodes them).
func NewAuditor(db DynamoDBScanAPI, store *monitordb.Store, monitorTable, releaseTable string) (*Auditor, error) {
	if db == nil || store == nil || monitorTable == "" || releaseTable == "" {
		return nil, errors.New("opsdb: NewAuditor needs a client, the monitor store and both table names")
	}
	return &Auditor{db: db, monitor: store, monitorTable: monitorTable, releaseTable: releaseTable, Segments: 4, Readers: 16}, nil
}

// Finding names one invalid record.
type Finding struct {
	Table string `json:"table"`
	// Kind is monitor, journal, evidence, delivery or the release record
	// kind (plan, job, source, result, approval).
	Kind string `json:"kind"`
	// EventID and Key identify the record (Key: the release sort key).
	EventID string `json:"event_id"`
	Key     string `json:"key,omitempty"`
	Code    string `json:"code"`
}

// AuditReport is the outcome of an audit.
type AuditReport struct {
	MonitorRecords int `json:"monitor_records"`
	JournalItems   int `json:"journal_items"`
	// AckItems counts the acknowledgement journal items (ack#<event id>).
	AckItems     int       `json:"ack_items"`
	ReleaseItems int       `json:"release_items"`
	Invalid      []Finding `json:"invalid"`
}

// Audit scans both tables with Segments parallel segments each and checks
// every record: monitor records with monitor.Validate (as decoded by
// adapters/monitordb, index keys included), journal items, evidence and
// delivery records with the health rules and their index keys, other
// release items by decoding them.
func (a *Auditor) Audit(ctx context.Context) (AuditReport, error) {
	var rep AuditReport
	var mu sync.Mutex
	add := func(f Finding) {
		mu.Lock()
		rep.Invalid = append(rep.Invalid, f)
		mu.Unlock()
	}
	var monitorIDs []string
	err := a.scan(ctx, a.monitorTable, func(item map[string]types.AttributeValue) {
		key, _ := stringAttr(item, topology.AttrEventID)
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(key, AckJournalPrefix) {
			rep.AckItems++
			if _, err := decodeAckJournal(item); err != nil {
				rep.Invalid = append(rep.Invalid, Finding{Table: a.monitorTable, Kind: "ack", EventID: formatKey(key), Code: core.CodeOf(err)})
			}
			return
		}
		if strings.HasPrefix(key, JournalPrefix) {
			rep.JournalItems++
			if _, err := decodeJournal(item); err != nil {
				rep.Invalid = append(rep.Invalid, Finding{Table: a.monitorTable, Kind: "journal", EventID: formatKey(key), Code: core.CodeOf(err)})
			}
			return
		}
		rep.MonitorRecords++
		monitorIDs = append(monitorIDs, key)
	})
	if err != nil {
		return AuditReport{}, err
	}
	if err := a.checkMonitor(ctx, monitorIDs, add); err != nil {
		return AuditReport{}, err
	}
	err = a.scan(ctx, a.releaseTable, func(item map[string]types.AttributeValue) {
		f, ok := checkReleaseItem(item)
		mu.Lock()
		defer mu.Unlock()
		rep.ReleaseItems++
		if !ok {
			f.Table = a.releaseTable
			rep.Invalid = append(rep.Invalid, f)
		}
	})
	if err != nil {
		return AuditReport{}, err
	}
	sort.Slice(rep.Invalid, func(i, j int) bool {
		x, y := rep.Invalid[i], rep.Invalid[j]
		if x.Table != y.Table {
			return x.Table < y.Table
		}
		if x.EventID != y.EventID {
			return x.EventID < y.EventID
		}
		return x.Key < y.Key
	})
	if rep.Invalid == nil {
		rep.Invalid = []Finding{}
	}
	return rep, nil
}

// scan runs ParallelScan over table with the auditor's segments.
func (a *Auditor) scan(ctx context.Context, table string, visit func(map[string]types.AttributeValue)) error {
	return ParallelScan(ctx, a.db, table, a.Segments, visit)
}

// ParallelScan reads every item of table with a strongly consistent,
// segmented parallel Scan and calls visit for each item. visit is called
// from several goroutines at once and must be safe for that. This is the
// one full-table read of the project: it serves the on-demand audit and the
// test-side invariant checker (dev/proof/invariant), never a request path.
func ParallelScan(ctx context.Context, db DynamoDBScanAPI, table string, segments int, visit func(map[string]types.AttributeValue)) error {
	segments = max(1, segments)
	errs := make([]error, segments)
	var wg sync.WaitGroup
	for seg := range segments {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := &dynamodb.ScanInput{
				TableName: aws.String(table), Segment: aws.Int32(int32(seg)), TotalSegments: aws.Int32(int32(segments)),
				ConsistentRead: aws.Bool(true),
			}
			for pages := dynamodb.NewScanPaginator(db, in); pages.HasMorePages(); {
				out, err := pages.NextPage(ctx)
				if err != nil {
					errs[seg] = unavailable("audit scan "+table, err)
					return
				}
				for _, item := range out.Items {
					visit(item)
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// checkMonitor re-reads each scanned monitor record through the monitor's
// own store (consistent GetItem, the monitor's decoding) and validates it.
func (a *Auditor) checkMonitor(ctx context.Context, ids []string, add func(Finding)) error {
	sort.Strings(ids)
	work := make(chan string)
	errs := make([]error, max(1, a.Readers))
	var wg sync.WaitGroup
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				rec, err := a.monitor.Get(ctx, id)
				if core.HasCode(err, monitor.CodeEventMissing) {
					continue // deleted since the scan
				}
				if err != nil {
					errs[w] = err
					continue
				}
				if _, err := monitor.Validate(rec); err != nil {
					add(Finding{Table: a.monitorTable, Kind: health.KindMonitor, EventID: formatKey(id), Code: core.CodeOf(err)})
				}
			}
		}()
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		work <- id
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("audit monitor records: %w", err)
	}
	return ctx.Err()
}

// checkReleaseItem checks one release item; ok is false with the finding
// when it is invalid.
func checkReleaseItem(item map[string]types.AttributeValue) (Finding, bool) {
	pk, _ := stringAttr(item, topology.AttrPK)
	sk, _ := stringAttr(item, topology.AttrSK)
	eventID, _ := strings.CutPrefix(pk, releasedb.PKPrefix)
	f := Finding{Kind: releaseKind(sk), EventID: formatKey(eventID), Key: formatKey(sk)}
	switch f.Kind {
	case health.KindEvidence, health.KindDelivery:
		_, ok := DecodeRelease(item).Lease()
		f.Code = health.CodeEvidenceInvalid
		if f.Kind == health.KindDelivery {
			f.Code = health.CodeDeliveryInvalid
		}
		return f, ok
	}
	f.Code = CodeReleaseRecordInvalid
	rec, err := releasedb.Decode(item)
	if a, ok := rec.(*release.AckRecord); ok && release.ValidateAckRecord(a) != nil {
		return f, false
	}
	return f, err == nil && core.ValidToken(eventID) && releaseIndexKeysAgree(item, rec) && rec.RecordVersion() > 0
}

func releaseKind(sk string) string {
	switch {
	case sk == release.SKDelivery:
		return health.KindDelivery
	case strings.HasPrefix(sk, release.SKEvidencePrefix):
		return health.KindEvidence
	case sk == release.SKPlan:
		return "plan"
	case sk == release.SKBlocked:
		return "blocked"
	}
	if i := strings.IndexByte(sk, '#'); i > 0 && core.ValidToken(sk[:i]) {
		return sk[:i]
	}
	return "unknown"
}
