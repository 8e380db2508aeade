package invariant

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// Rules a Violation names.
const (
	RuleMonitorInvalid    = "monitor.validate"
	RuleWakeKeys          = "index.wake_keys"
	RuleFinalWakes        = "index.final_wakes"
	RuleAttentionKeys     = "index.attention_keys"
	RuleOutboxKeys        = "index.outbox_keys"
	RuleOutcomeOwed       = "outcome.owed"
	RuleIndexContents     = "index.contents"
	RuleAttempts          = "attempts.limit"
	RuleContentFree       = "content_free"
	RuleReleaseInvalid    = "release.validate"
	RuleEvidenceBinding   = "release.evidence_binding"
	RuleHashes            = "release.hashes"
	RuleApproval          = "release.approval"
	RuleApprovalSignature = "release.approval_signature"
	RuleDeliveryPremature = "release.delivery_premature"
	RuleBlockedWakes      = "release.blocked_wakes"
	RuleDeliveredTwice    = "delivery.completed_twice"
	RuleDeliveryLost      = "delivery.lost"
	RuleDeliveryUnknown   = "delivery.unknown"
)

// DynamoDBAPI is the part of *dynamodb.Client the checker uses; monitor
// records are read back through monitordb, which needs GetItem (and the
// rest of its DynamoDBAPI, of which it calls only GetItem here).
type DynamoDBAPI interface {
	monitordb.DynamoDBAPI
	Scan(ctx context.Context, params *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// Options say what to check.
type Options struct {
	DB DynamoDBAPI
	// MonitorTable and ReleaseTable are the table names; an empty name
	// skips that table.
	MonitorTable string
	ReleaseTable string
	// Texts are the source and translation texts the test used; none may
	// appear in a monitor item or a content-free release item.
	Texts []string
	// Delivered, when not nil, is the CMS server's receipts: event id →
	// delivery ids it accepted (a duplicate of the same delivery id counts
	// once, as the CMS dedupes on it).
	Delivered map[string][]string
	// OutcomesAnnounced, when set, requires every outcome to have been
	// announced: no monitor record may still carry outbox keys.
	OutcomesAnnounced bool
	// MaxPollAttempts, when > 0, bounds every record's poll_attempts (the
	// scenario's expectation: no item was polled more than that).
	MaxPollAttempts int
	// ApprovalKey, when set, is the approval authority's public key: every
	// approval token must open with it and bind the stored approval.
	ApprovalKey ed25519.PublicKey
	// Segments of each parallel Scan (default 4).
	Segments int
}

// Violation is one broken rule.
type Violation struct {
	Table  string `json:"table"`
	Key    string `json:"key"`
	Rule   string `json:"rule"`
	Detail string `json:"detail"`
}

func (v Violation) String() string {
	return fmt.Sprintf("%s %s [%s] %s", v.Table, v.Key, v.Rule, v.Detail)
}

// Report is the outcome of a check.
type Report struct {
	MonitorItems int
	ReleaseItems int
	// MonitorStates counts monitor records by state; DeliveryStates
	// delivery records by status.
	MonitorStates  map[monitor.State]int
	DeliveryStates map[release.State]int
	Violations     []Violation
}

type collector struct {
	mu sync.Mutex
	vs []Violation
}

func (c *collector) add(table, key, rule, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.vs = append(c.vs, Violation{Table: table, Key: key, Rule: rule, Detail: fmt.Sprintf(format, args...)})
}

// Check reads both tables and returns every violation it finds. An error
// means the tables could not be read (not that a rule broke).
func Check(ctx context.Context, o Options) (Report, error) {
	if o.DB == nil {
		return Report{}, errors.New("invariant: Check needs a client")
	}
	if o.Segments <= 0 {
		o.Segments = 4
	}
	rep := Report{MonitorStates: map[monitor.State]int{}, DeliveryStates: map[release.State]int{}}
	c := &collector{}
	if o.MonitorTable != "" {
		if err := checkMonitor(ctx, o, c, &rep); err != nil {
			return Report{}, err
		}
	}
	if o.ReleaseTable != "" {
		if err := checkRelease(ctx, o, c, &rep); err != nil {
			return Report{}, err
		}
	}
	sort.Slice(c.vs, func(i, j int) bool {
		a, b := c.vs[i], c.vs[j]
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Rule < b.Rule
	})
	rep.Violations = c.vs
	return rep, nil
}

// RequireClean runs Check and fails t with every violation listed.
func RequireClean(t testing.TB, o Options) Report {
	t.Helper()
	rep, err := Check(context.Background(), o)
	if err != nil {
		t.Fatalf("invariant check: %v", err)
	}
	if n := len(rep.Violations); n > 0 {
		var b strings.Builder
		for i, v := range rep.Violations {
			if i == 50 {
				fmt.Fprintf(&b, "\n  … %d more", n-i)
				break
			}
			b.WriteString("\n  " + v.String())
		}
		t.Fatalf("%d invariant violations:%s", n, b.String())
	}
	return rep
}

// scan reads every item of table (opsdb.ParallelScan, the audit's scan).
func scan(ctx context.Context, db DynamoDBAPI, table string, segments int) ([]map[string]types.AttributeValue, error) {
	var mu sync.Mutex
	var items []map[string]types.AttributeValue
	err := opsdb.ParallelScan(ctx, db, table, segments, func(item map[string]types.AttributeValue) {
		mu.Lock()
		items = append(items, item)
		mu.Unlock()
	})
	if err != nil {
		return nil, fmt.Errorf("invariant: scan %s: %w", table, err)
	}
	return items, nil
}

// indexKey is one entry of a sparse index.
type indexKey struct{ pk, sk string }

// queryIndex returns every key of a sparse KEYS_ONLY index (all shards).
func queryIndex(ctx context.Context, db DynamoDBAPI, table, index, shardAttr string, keyOf func(map[string]types.AttributeValue) indexKey) (map[indexKey]bool, error) {
	keys := map[indexKey]bool{}
	for shard := range topology.WakeShards {
		in := &dynamodb.QueryInput{
			TableName: aws.String(table), IndexName: aws.String(index),
			KeyConditionExpression:    aws.String("#s = :s"),
			ExpressionAttributeNames:  map[string]string{"#s": shardAttr},
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberN{Value: fmt.Sprint(shard)}},
		}
		for pages := dynamodb.NewQueryPaginator(db, in); pages.HasMorePages(); {
			out, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("invariant: query %s.%s: %w", table, index, err)
			}
			for _, it := range out.Items {
				keys[keyOf(it)] = true
			}
		}
	}
	return keys, nil
}

func str(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// num reads a number attribute; present reports whether it exists at all.
func num(item map[string]types.AttributeValue, name string) (n int64, present bool) {
	av, ok := item[name]
	if !ok {
		return 0, false
	}
	v, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return -1, true
	}
	if _, err := fmt.Sscan(v.Value, &n); err != nil {
		return -1, true
	}
	return n, true
}

// findText returns the first text of texts found anywhere in av.
func findText(av types.AttributeValue, texts []string) (string, bool) {
	hit := func(s string) (string, bool) {
		for _, t := range texts {
			if t != "" && strings.Contains(s, t) {
				return t, true
			}
		}
		return "", false
	}
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return hit(v.Value)
	case *types.AttributeValueMemberB:
		return hit(string(v.Value))
	case *types.AttributeValueMemberSS:
		return hit(strings.Join(v.Value, "\x00"))
	case *types.AttributeValueMemberBS:
		for _, b := range v.Value {
			if t, ok := hit(string(b)); ok {
				return t, true
			}
		}
	case *types.AttributeValueMemberL:
		for _, x := range v.Value {
			if t, ok := findText(x, texts); ok {
				return t, true
			}
		}
	case *types.AttributeValueMemberM:
		for k, x := range v.Value {
			if t, ok := hit(k); ok {
				return t, true
			}
			if t, ok := findText(x, texts); ok {
				return t, true
			}
		}
	}
	return "", false
}

func contentFree(c *collector, table, key string, item map[string]types.AttributeValue, texts []string) {
	for name, av := range item {
		if t, ok := findText(av, texts); ok {
			c.add(table, key, RuleContentFree, "attribute %s holds a text the test used (%d bytes, sha256 %s)", name, len(t), core.SHA256Hex([]byte(t))[:12])
		}
	}
}
