package releasedb

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/topology"
)

func TestItemIndexKeys(t *testing.T) {
	for _, rec := range releasetest.SampleRecords("evt-1") {
		item, err := Item(rec)
		if err != nil {
			t.Fatal(err)
		}
		_, sk := rec.Key()
		wakeMS, wakes, attMS, att := release.Wake(rec)
		t.Run(sk, func(t *testing.T) {
			if got := item[topology.AttrPK].(*types.AttributeValueMemberS).Value; got != "event#evt-1" {
				t.Fatalf("pk %s", got)
			}
			checkNumber(t, item, topology.AttrWakeMS, wakes, wakeMS)
			checkNumber(t, item, topology.AttrAttentionMS, att, attMS)
			if _, ok := item[topology.AttrWakeShard]; ok != wakes {
				t.Fatalf("wake shard present=%v", ok)
			}
			if _, ok := item[topology.AttrAttentionShard]; ok != att {
				t.Fatalf("attention shard present=%v", ok)
			}
			back, err := Decode(item)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := json.Marshal(back)
			b, _ := json.Marshal(rec)
			if !bytes.Equal(a, b) {
				t.Fatalf("round trip:\n%s\n%s", a, b)
			}
		})
	}
}

func checkNumber(t *testing.T, item map[string]types.AttributeValue, name string, present bool, want int64) {
	t.Helper()
	v, ok := item[name]
	if ok != present {
		t.Fatalf("%s present=%v, want %v", name, ok, present)
	}
	if ok {
		n := v.(*types.AttributeValueMemberN).Value
		if n != strings.TrimSpace(jsonInt(want)) {
			t.Fatalf("%s = %s, want %d", name, n, want)
		}
	}
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// Every item carries schema_version 1 (release.SchemaVersion); one
// without it, or of another version, is refused by Decode and by
// DecodeProjected (the census) with release.CodeSchemaUnsupported.
func TestItemsCarryTheSchemaVersion(t *testing.T) {
	for _, rec := range releasetest.SampleRecords("evt-1") {
		_, sk := rec.Key()
		item, err := Item(rec)
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := item[release.AttrSchemaVersion].(*types.AttributeValueMemberN); !ok || n.Value != "1" {
			t.Fatalf("%s: schema_version %v", sk, item[release.AttrSchemaVersion])
		}
		for name, alter := range map[string]func(){
			"none": func() { delete(item, release.AttrSchemaVersion) },
			"2":    func() { item[release.AttrSchemaVersion] = &types.AttributeValueMemberN{Value: "2"} },
			"text": func() { item[release.AttrSchemaVersion] = &types.AttributeValueMemberS{Value: "1"} },
		} {
			alter()
			if _, err := Decode(item); !core.HasCode(err, release.CodeSchemaUnsupported) {
				t.Errorf("%s, schema_version %s: Decode %v", sk, name, err)
			}
			if _, err := DecodeProjected(item); !core.HasCode(err, release.CodeSchemaUnsupported) {
				t.Errorf("%s, schema_version %s: DecodeProjected %v", sk, name, err)
			}
		}
	}
}

func TestDecodeRefusesUnknownItems(t *testing.T) {
	for name, item := range map[string]map[string]types.AttributeValue{
		"no sk":       {topology.AttrPK: &types.AttributeValueMemberS{Value: "event#e"}},
		"unknown sk":  {topology.AttrPK: &types.AttributeValueMemberS{Value: "event#e"}, topology.AttrSK: &types.AttributeValueMemberS{Value: "other"}},
		"bad type":    {topology.AttrPK: &types.AttributeValueMemberS{Value: "event#e"}, topology.AttrSK: &types.AttributeValueMemberS{Value: "plan"}, "v": &types.AttributeValueMemberS{Value: "x"}},
		"foreign key": {topology.AttrPK: &types.AttributeValueMemberS{Value: "x"}, topology.AttrSK: &types.AttributeValueMemberS{Value: "job#j"}, "job_id": &types.AttributeValueMemberS{Value: "j"}},
	} {
		if _, err := Decode(item); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// compactItem is the item of a compact approval (releasetest's sample).
func compactItem(t *testing.T, eventID string) map[string]types.AttributeValue {
	t.Helper()
	item, err := Item(releasetest.SampleCompactApproval(eventID, "job-2", 1_764_460_800_000))
	if err != nil {
		t.Fatal(err)
	}
	return item
}

// malformedApprovals alters a compact approval item into rows a store
// read refuses with release.CodeStoredApprovalInvalid (docs/design.md
// "Compact approvals").
var malformedApprovals = map[string]func(item map[string]types.AttributeValue){
	"a token too":     func(it map[string]types.AttributeValue) { it["token"] = &types.AttributeValueMemberS{Value: "v1.a.b"} },
	"no body, no sig": func(it map[string]types.AttributeValue) { delete(it, "body"); delete(it, "sig") },
	"no key id":       func(it map[string]types.AttributeValue) { delete(it, "key_id") },
	"the token layout": func(it map[string]types.AttributeValue) {
		delete(it, "body")
		delete(it, "sig")
		it["token"] = &types.AttributeValueMemberS{Value: "v1.a.b"}
	},
	"no signature": func(it map[string]types.AttributeValue) { delete(it, "sig") },
	"short signature": func(it map[string]types.AttributeValue) {
		it["sig"] = &types.AttributeValueMemberB{Value: make([]byte, 63)}
	},
	"body not json": func(it map[string]types.AttributeValue) { it["body"] = &types.AttributeValueMemberS{Value: "{"} },
	"body of another event": func(it map[string]types.AttributeValue) {
		body := it["body"].(*types.AttributeValueMemberS).Value
		it["body"] = &types.AttributeValueMemberS{Value: strings.Replace(body, `"event_id":"evt-1"`, `"event_id":"evt-2"`, 1)}
	},
	"body of another job": func(it map[string]types.AttributeValue) {
		body := it["body"].(*types.AttributeValueMemberS).Value
		it["body"] = &types.AttributeValueMemberS{Value: strings.Replace(body, `"job_id":"job-2"`, `"job_id":"job-3"`, 1)}
	},
	"expires_ms disagrees": func(it map[string]types.AttributeValue) { it["expires_ms"] = &types.AttributeValueMemberN{Value: "1"} },
	"plan_id beside body": func(it map[string]types.AttributeValue) {
		it["plan_id"] = &types.AttributeValueMemberS{Value: "plan-1"}
	},
}

// An approval item decodes with its token rebuilt; the census projection
// of it (no body, no signature) decodes with DecodeProjected and is
// refused by Decode; malformed rows, and the token layout that was never
// released, are refused with the stored-approval code, never a panic.
func TestDecodeApprovals(t *testing.T) {
	item := compactItem(t, "evt-1")
	for _, gone := range []string{"token", "plan_id", "target_locale", "result_sha256", "request_id", "approval_id", "outbox_ms", "outbox_shard"} {
		if _, ok := item[gone]; ok {
			t.Errorf("compact item holds %s", gone)
		}
	}
	rec, err := Decode(item)
	if err != nil {
		t.Fatal(err)
	}
	if a := rec.(*release.ApprovalRecord); a.Token != release.BuildToken([]byte(a.Body), a.Sig) || a.ApprovalID == "" || a.RequestID == "" {
		t.Fatalf("decoded %+v", a)
	}
	projected := map[string]types.AttributeValue{}
	for _, name := range topology.ReleaseCensusAttributes {
		if v, ok := item[name]; ok {
			projected[name] = v
		}
	}
	if _, err := DecodeProjected(projected); err != nil {
		t.Fatalf("census projection: %v", err)
	}
	if _, err := Decode(projected); !core.HasCode(err, release.CodeStoredApprovalInvalid) {
		t.Fatalf("projection read as a whole record: %v", err)
	}
	for name, alter := range malformedApprovals {
		it := compactItem(t, "evt-1")
		alter(it)
		if _, err := Decode(it); !core.HasCode(err, release.CodeStoredApprovalInvalid) {
			t.Errorf("%s: %v, want %s", name, err, release.CodeStoredApprovalInvalid)
		}
	}
}
