package monitordb

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/monitortest"
	"github.com/localeflow/localeflow/topology"
)

func TestShardSpread(t *testing.T) {
	counts := make([]int, topology.WakeShards)
	for i := range 8000 {
		counts[Shard("evt-"+string(rune(i)))]++
	}
	for s, n := range counts {
		if n < 700 || n > 1300 {
			t.Fatalf("shard %d holds %d of 8000", s, n)
		}
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	rec := monitortest.NewRecord("evt-1", monitortest.T0)
	rec = monitor.ApplyClaim(rec, monitor.Lease{Owner: "w", Token: "tok", NowMS: monitortest.T0 + 1, ExpiresMS: monitortest.T0 + 100})
	av, err := encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	// A leased item keeps the wake key at next_poll_ms (the claim does not
	// move it).
	if n, ok := av[attrWakeMS].(*types.AttributeValueMemberN); !ok || n.Value != fmt.Sprint(rec.NextPollMS) {
		t.Fatalf("wake_ms = %v, want next_poll_ms %d", av[attrWakeMS], rec.NextPollMS)
	}
	if _, ok := av[attrAttentionMS]; ok {
		t.Fatal("leased item in the attention index")
	}
	if _, ok := av[attrLastErrorCode]; ok {
		t.Fatal("empty optional attribute stored")
	}
	got := decode(av)
	if got.Corrupt || got.LeaseToken != "tok" || got.PollAttempts != 1 || got.NextPollMS != rec.NextPollMS {
		t.Fatalf("decoded %+v", got)
	}
	if _, err := monitor.Validate(got); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecode feeds arbitrary attribute values to decode: it must never
// panic, and anything it does not flag corrupt must re-encode to the same
// record.
func FuzzDecode(f *testing.F) {
	f.Add("pending", "7", "x", "1764417600000", true)
	f.Add("leased", "1.5", "", "-1", false)
	f.Fuzz(func(t *testing.T, state, num, str, ms string, withWake bool) {
		av, _ := encode(monitortest.NewRecord("evt-1", monitortest.T0))
		av[attrState] = &types.AttributeValueMemberS{Value: state}
		av[attrSourceSequence] = &types.AttributeValueMemberN{Value: num}
		av[attrLeaseToken] = &types.AttributeValueMemberS{Value: str}
		av[attrNextPollMS] = &types.AttributeValueMemberN{Value: ms}
		if !withWake {
			delete(av, attrWakeMS)
		}
		rec := decode(av)
		if _, err := monitor.Validate(rec); err == nil && rec.Corrupt {
			t.Fatal("corrupt record validated")
		}
		if rec.Corrupt {
			return
		}
		again, err := encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if back := decode(again); back.Corrupt || back.State != rec.State || back.NextPollMS != rec.NextPollMS {
			t.Fatalf("round trip changed %+v -> %+v", rec, back)
		}
	})
}
