package opsdb_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/topology"
)

// TestDecodeReleaseEntries: every record the release table's indexes can
// hold decodes into its own field; an entry whose index keys disagree with
// its record (here: an attention mark the record does not carry), or that
// is of another schema version, is Corrupt.
func TestDecodeReleaseEntries(t *testing.T) {
	for _, rec := range releasetest.SampleRecords("evt-1") {
		_, wakes, _, attention := release.Wake(rec)
		if !wakes && !attention {
			continue
		}
		item, err := releasedb.Item(rec)
		if err != nil {
			t.Fatal(err)
		}
		got := opsdb.DecodeRelease(item)
		set := 0
		for _, p := range []bool{got.Evidence != nil, got.Delivery != nil, got.Job != nil, got.Approval != nil, got.Blocked != nil} {
			if p {
				set++
			}
		}
		if got.Corrupt || set != 1 {
			t.Fatalf("%T decoded as %+v", rec, got)
		}
	}
	job := releasetest.SampleRecords("evt-1")[3]
	if _, ok := job.(*release.JobRecord); !ok {
		t.Fatalf("sample 3 is %T", job)
	}
	item, err := releasedb.Item(job)
	if err != nil {
		t.Fatal(err)
	}
	if got := opsdb.DecodeRelease(item); got.Corrupt {
		t.Fatalf("the job record decoded as %+v", got)
	}
	item[release.AttrSchemaVersion] = &types.AttributeValueMemberN{Value: "2"}
	if got := opsdb.DecodeRelease(item); !got.Corrupt {
		t.Fatalf("a job record of schema version 2 decoded as %+v", got)
	}
	item[release.AttrSchemaVersion] = &types.AttributeValueMemberN{Value: "1"}
	item[topology.AttrAttentionShard] = &types.AttributeValueMemberN{Value: "0"}
	item[topology.AttrAttentionMS] = &types.AttributeValueMemberN{Value: "1"}
	if got := opsdb.DecodeRelease(item); !got.Corrupt {
		t.Fatalf("a job record with an attention mark decoded as %+v", got)
	}
}
