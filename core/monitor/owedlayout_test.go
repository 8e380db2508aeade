package monitor

import (
	"testing"

	"github.com/localeflow/localeflow/core"
)

func TestParseOwedLayout(t *testing.T) {
	for in, want := range map[string]OwedLayout{"": OwedInWake, "wake": OwedInWake, "outbox": OwedInOutbox} {
		if got, err := ParseOwedLayout(in); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"Wake", " wake", "outbox ", "attention", "wake\x00"} {
		if got, err := ParseOwedLayout(in); !core.HasCode(err, CodeOwedLayoutInvalid) || got != "" {
			t.Errorf("%q: %q, %v; want %s", in, got, err, CodeOwedLayoutInvalid)
		}
	}
}
