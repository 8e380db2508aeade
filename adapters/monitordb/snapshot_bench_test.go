package monitordb

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// BenchmarkSnapshotEncode and BenchmarkSnapshotDecode measure the CPU the
// compact snapshot adds to a poll (one encode in the finishing write, one
// decode for each ALL_NEW answer: claim and finishing write).
func BenchmarkSnapshotEncode(b *testing.B) {
	rec := watchedRecord("evt-bench-1", "processing")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeSnapshot(rec.Lifecycle); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSnapshotDecode(b *testing.B) {
	rec := watchedRecord("evt-bench-1", "processing")
	snap, err := encodeSnapshot(rec.Lifecycle)
	if err != nil {
		b.Fatal(err)
	}
	av := &types.AttributeValueMemberB{Value: snap}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeSnapshot(av); err != nil {
			b.Fatal(err)
		}
	}
}
