package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/internal/logcapture"
)

func TestRunPrintsIssuersAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out logcapture.Buffer
	done := make(chan error, 1)
	seed := strings.Repeat("ab", 32)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-key-hex", hex.EncodeToString([]byte("evidence-main-test-key-01")), "-issuer-seed-hex", seed, "-issuer", "ev-1"}, func(string) string { return "" }, &out)
	}()
	var ready struct {
		URL     string `json:"url"`
		Issuers string `json:"receipt_issuers"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for ready.URL == "" {
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %s", out.String())
		}
		line, _, _ := strings.Cut(out.String(), "\n")
		_ = json.Unmarshal([]byte(line), &ready)
		time.Sleep(10 * time.Millisecond)
	}
	name, pub, ok := strings.Cut(ready.Issuers, "=")
	if b, err := hex.DecodeString(pub); !ok || name != "ev-1" || err != nil || len(b) != 32 {
		t.Fatalf("issuers %q", ready.Issuers)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	k := hex.EncodeToString([]byte("evidence-main-test-key-01"))
	seed := strings.Repeat("ab", 32)
	for name, args := range map[string][]string{
		"NoKey":     {"-issuer-seed-hex", seed},
		"NoSeed":    {"-key-hex", k},
		"ShortSeed": {"-key-hex", k, "-issuer-seed-hex", "abcd"},
		"LongSeed":  {"-key-hex", k, "-issuer-seed-hex", seed + "ab"},
		"BadIssuer": {"-key-hex", k, "-issuer-seed-hex", seed, "-issuer", "a b"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(context.Background(), args, func(string) string { return "" }, &bytes.Buffer{}); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
