package monitordb

import (
	"bytes"
	"compress/flate"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/monitortest"
)

// watchedRecord is a record with a verified snapshot of status.
func watchedRecord(eventID, status string) monitor.Record {
	rec := monitortest.NewRecord(eventID, monitortest.T0)
	snap := monitortest.Snapshot(rec, status)
	rec.State, rec.PollAttempts, rec.NextPollMS, rec.UpdatedMS = monitor.StateWatching, 1, monitortest.T0+1000, monitortest.T0+1
	rec.RemoteStatus, rec.LifecycleSHA256, rec.Lifecycle = snap.Status, snap.SHA256, snap.Canonical
	return rec
}

func TestSnapshotIsStoredCompactAndReadBack(t *testing.T) {
	rec := watchedRecord("evt-snap-1", "processing")
	av, err := encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := av[attrLifecycle].(*types.AttributeValueMemberB)
	if !ok || b.Value[0] != snapshotFormatDeflate || len(b.Value) >= len(rec.Lifecycle)/2 {
		t.Fatalf("lifecycle stored as %T (%d bytes for a %d-byte snapshot)", av[attrLifecycle], len(b.Value), len(rec.Lifecycle))
	}
	got := decode(av)
	if got.Corrupt || !bytes.Equal(got.Lifecycle, rec.Lifecycle) {
		t.Fatalf("decoded corrupt=%v lifecycle %q", got.Corrupt, got.Lifecycle)
	}
	if _, err := monitor.Validate(got); err != nil {
		t.Fatal(err)
	}
}

func deflated(format byte, data []byte) []byte {
	var b bytes.Buffer
	b.WriteByte(format)
	w, err := flate.NewWriterDict(&b, flate.BestSpeed, []byte(snapshotDictionary))
	if err != nil {
		panic(err)
	}
	if _, err := w.Write(data); err != nil {
		panic(err)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func TestSnapshotThatDoesNotDecodeIsCorrupt(t *testing.T) {
	rec := watchedRecord("evt-snap-3", "processing")
	good := deflated(snapshotFormatDeflate, rec.Lifecycle)
	for name, v := range map[string]types.AttributeValue{
		"unknown format":     &types.AttributeValueMemberB{Value: deflated(2, rec.Lifecycle)},
		"truncated stream":   &types.AttributeValueMemberB{Value: good[:len(good)/2]},
		"not deflate":        &types.AttributeValueMemberB{Value: append([]byte{snapshotFormatDeflate}, rec.Lifecycle...)},
		"format byte only":   &types.AttributeValueMemberB{Value: []byte{snapshotFormatDeflate}},
		"above the size cap": &types.AttributeValueMemberB{Value: deflated(snapshotFormatDeflate, bytes.Repeat([]byte(" "), lifecycle.MaxSnapshotBytes+1))},
		"a number":           &types.AttributeValueMemberN{Value: "1"},
		// The canonical JSON as a string was never a released form.
		"the canonical JSON as a string": &types.AttributeValueMemberS{Value: string(rec.Lifecycle)},
		"an empty string":                &types.AttributeValueMemberS{Value: ""},
		"a snapshot modified":            &types.AttributeValueMemberB{Value: deflated(snapshotFormatDeflate, bytes.Replace(rec.Lifecycle, []byte("processing"), []byte("publishing"), 1))},
	} {
		t.Run(name, func(t *testing.T) {
			av, err := encode(rec)
			if err != nil {
				t.Fatal(err)
			}
			av[attrLifecycle] = v
			got := decode(av)
			if _, err := monitor.Validate(got); !core.HasCode(err, monitor.CodeStateInvalid) {
				t.Fatalf("Validate = %v (corrupt %v)", err, got.Corrupt)
			}
		})
	}
}

// Bytes after the end of the DEFLATE stream make the record corrupt
// (issue 24): they used to be ignored, so a tampered item could carry
// anything (an e-mail address) after a valid snapshot and still pass the
// integrity check. The same stream without them still reads.
func TestSnapshotWithTrailingBytesIsCorrupt(t *testing.T) {
	rec := watchedRecord("evt-snap-4", "processing")
	good := deflated(snapshotFormatDeflate, rec.Lifecycle)
	av, err := encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	av[attrLifecycle] = &types.AttributeValueMemberB{Value: good}
	if got := decode(av); got.Corrupt || !bytes.Equal(got.Lifecycle, rec.Lifecycle) {
		t.Fatalf("the stream alone: corrupt=%v", got.Corrupt)
	}
	for name, tail := range map[string][]byte{
		"one zero byte":    {0},
		"an e-mail":        []byte("jane.doe@example.com"),
		"a second stream":  good[1:],
		"the format again": {snapshotFormatDeflate},
	} {
		t.Run(name, func(t *testing.T) {
			av, err := encode(rec)
			if err != nil {
				t.Fatal(err)
			}
			av[attrLifecycle] = &types.AttributeValueMemberB{Value: append(append([]byte(nil), good...), tail...)}
			got := decode(av)
			if _, err := monitor.Validate(got); !got.Corrupt || !core.HasCode(err, monitor.CodeStateInvalid) {
				t.Fatalf("snapshot with %d trailing bytes: corrupt=%v, Validate = %v", len(tail), got.Corrupt, err)
			}
		})
	}
}

// The dictionary is part of the stored format: a changed dictionary would
// make every stored snapshot unreadable (corrupt).
func TestSnapshotDictionaryNeverChanges(t *testing.T) {
	const want = "15b7dbbe36014cc38c4d6f96c4bf7776562efb91dca70978619d614f3bea2f53"
	if got := core.SHA256Hex([]byte(snapshotDictionary)); got != want {
		t.Fatalf("snapshot dictionary sha256 %s, want %s: add a format byte for another dictionary instead", got, want)
	}
}

// costWorkloadRecord is the item of a change of dev/proof/cost's
// BenchmarkMonitorCost at its largest: leased for its tenth poll, with a
// full timeline of "processing" answers.
func costWorkloadRecord(t *testing.T) monitor.Record {
	t.Helper()
	const id = "evt-cost-0-00099"
	change := core.SHA256Hex([]byte("change:" + id))
	binding, err := monitor.Binding(id, "site-proof", "plan-"+id, "v1", 1, 1, change, 5)
	if err != nil {
		t.Fatal(err)
	}
	now := monitortest.T0 + 3_600_000
	rec := monitor.Record{
		EventID: id, SiteID: "site-proof", PlanID: "plan-" + id, WebsiteVersion: "v1", SourceSequence: 1, JobCount: 1,
		ChangeSHA256: change, BindingSHA256: binding, State: monitor.StateWatching, PollAttempts: 9,
		MaxConsecutiveFailures: 5, NextPollMS: now, CreatedMS: monitortest.T0, UpdatedMS: now - 1000,
		SchemaVersion: monitor.SchemaVersion,
	}
	// The test CMS's answer: a random 128-bit request id.
	body := fmt.Sprintf(`{"approved_locales":[],"blocked_locales":[],"delivery":null,"event_id":%q,"plan_id":%q,"queue_counts":{},"request_id":"req-%s","required_locales":["de-DE"],"schema":"localeflow.cms-lifecycle.v1","site_id":"site-proof","source_sequence":1,"status":"processing","tombstone":null,"website_version":"v1"}`,
		id, rec.PlanID, core.SHA256Hex([]byte(id))[:32])
	snap, err := lifecycle.Parse(rec.Target(), "", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	rec.RemoteStatus, rec.LifecycleSHA256, rec.Lifecycle = snap.Status, snap.SHA256, snap.Canonical
	for i := range monitor.TimelineMax {
		rec.Timeline = monitor.AppendTimeline(rec.Timeline, monitor.TimelineEntry{
			AtMS: now - int64(5-i)*2213, State: monitor.StateWatching, RemoteStatus: "processing"})
	}
	// A lease as the service makes it: 256-bit token, base64url.
	return monitor.ApplyClaim(rec, monitor.Lease{Owner: "cost-0", Token: strings.Repeat("T", 43), NowMS: now, ExpiresMS: now + 5000})
}

// TestWatchedItemStaysUnderOneKilobyte: a write costs one unit per started
// KB of the larger of the item before and after it, so the item of a
// watched change, leased (the claim's after image, the finishing write's
// before image) with a full timeline, must stay under 1 KB for each claim
// and each finishing write to cost one unit.
func TestWatchedItemStaysUnderOneKilobyte(t *testing.T) {
	rec := costWorkloadRecord(t)
	av, err := encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := monitor.Validate(decode(av)); err != nil {
		t.Fatal(err)
	}
	if n := ItemSize(av); n >= 1024 {
		t.Fatalf("leased item of the cost workload is %d bytes, want < 1024", n)
	}
	t.Logf("leased item: %d bytes (snapshot %d bytes stored for %d canonical)", ItemSize(av), valueSize(av[attrLifecycle]), len(rec.Lifecycle))
}

func TestItemSizeFollowsDynamoDBRules(t *testing.T) {
	av := map[string]types.AttributeValue{
		"s":  &types.AttributeValueMemberS{Value: "abc"},                                                                              // 1 + 3
		"n":  &types.AttributeValueMemberN{Value: "1796105376891"},                                                                    // 1 + 13 digits: 7 + 1
		"z":  &types.AttributeValueMemberN{Value: "1000"},                                                                             // 1 + 1 digit: 1 + 1
		"b":  &types.AttributeValueMemberB{Value: []byte{1, 2}},                                                                       // 1 + 2
		"t":  &types.AttributeValueMemberBOOL{Value: true},                                                                            // 1 + 1
		"l":  &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "x"}}},                   // 1 + 3 + 1 + 1
		"m":  &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberNULL{Value: true}}}, // 1 + 3 + 1 + 1 + 1
		"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bc"}},                                                               // 2 + 3
	}
	if got, want := ItemSize(av), 4+9+3+3+2+6+7+5; got != want {
		t.Fatalf("ItemSize = %d, want %d", got, want)
	}
}
