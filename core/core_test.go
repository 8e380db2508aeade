package core

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestValidators(t *testing.T) {
	tests := []struct {
		name string
		fn   func(string) bool
		in   string
		want bool
	}{
		{"token simple", ValidToken, "evt-2026-0001", true},
		{"token chars", ValidToken, "a_b.c:d-E9", true},
		{"token empty", ValidToken, "", false},
		{"token space", ValidToken, "a b", false},
		{"token slash", ValidToken, "a/b", false},
		{"token 256", ValidToken, strings.Repeat("a", 256), true},
		{"token 257", ValidToken, strings.Repeat("a", 257), false},
		{"token newline", ValidToken, "abc\n", false},
		{"code ok", ValidErrorCode, "lifecycle_monitor.claim_lost", true},
		{"code dash", ValidErrorCode, "cms.http_503", true},
		{"code upper", ValidErrorCode, "Cms.x", false},
		{"code digit first", ValidErrorCode, "1abc", false},
		{"code 128", ValidErrorCode, "a" + strings.Repeat("b", 127), true},
		{"code 129", ValidErrorCode, "a" + strings.Repeat("b", 128), false},
		{"sha ok", ValidSHA256, strings.Repeat("0f", 32), true},
		{"sha upper", ValidSHA256, strings.Repeat("0F", 32), false},
		{"sha short", ValidSHA256, strings.Repeat("0", 63), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fn(tt.in); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	if ValidTokenN(strings.Repeat("w", 129), MaxWorkerIDLength) {
		t.Fatal("worker id over 128 accepted")
	}
}

func TestErrorCodesAndWrapping(t *testing.T) {
	cause := errors.New("dial tcp: refused")
	err := fmt.Errorf("poll evt-1: %w", Wrap("cms.unavailable", true, cause))
	if CodeOf(err) != "cms.unavailable" || !IsRetryable(err) {
		t.Fatalf("code/retryable lost through wrapping: %v", err)
	}
	if !errors.Is(err, cause) {
		t.Fatal("cause not unwrapped")
	}
	if !errors.Is(err, Fail("cms.unavailable")) || errors.Is(err, Fail("cms.other")) {
		t.Fatal("errors.Is must compare codes")
	}
	if CodeOf(errors.New("plain")) != "" || IsRetryable(errors.New("plain")) {
		t.Fatal("plain error must have no code and not be retryable")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("invalid code must panic")
		}
	}()
	_ = Fail("Not A Code")
}

func TestMillis(t *testing.T) {
	ts := time.Date(2026, 11, 29, 12, 0, 0, 999_999, time.UTC)
	if Millis(ts) != 1795953600000 {
		t.Fatalf("Millis = %d", Millis(ts))
	}
	if !FromMillis(1795953600000).Equal(ts.Truncate(time.Millisecond)) {
		t.Fatal("FromMillis round trip")
	}
	if ValidMillis(-1) || !ValidMillis(0) || ValidMillis(253402300800000) {
		t.Fatal("ValidMillis bounds")
	}
	c := ClockFunc(func() time.Time { return ts })
	if !c.Now().Equal(ts) {
		t.Fatal("ClockFunc")
	}
}
