package releasedb

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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
