package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/dev/logcapture"
)

func TestRunPrintsIssuersAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out logcapture.Buffer
	done := make(chan error, 1)
	seed := strings.Repeat("ab", 32)
	env := map[string]string{"LOCALEFLOW_HUMAN_ISSUER_SEED_HEX": strings.Repeat("cd", 32)}
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-key-hex", hex.EncodeToString([]byte("evidence-main-test-key-01")),
			"-issuer-seed-hex", seed, "-issuer", "ev-1", "-review-issuer-seed-hex", strings.Repeat("ef", 32)}, func(k string) string { return env[k] }, &out)
	}()
	var ready struct {
		URL         string `json:"url"`
		Quality     string `json:"receipt_issuers_quality"`
		HumanReview string `json:"receipt_issuers_human_review"`
		Independent string `json:"receipt_issuers_independent_review"`
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
	keys := map[string]bool{}
	for want, v := range map[string]string{"ev-1": ready.Quality, "human-review-local": ready.HumanReview, "independent-review-local": ready.Independent} {
		name, pub, ok := strings.Cut(v, "=")
		if b, err := hex.DecodeString(pub); !ok || name != want || err != nil || len(b) != 32 || keys[pub] {
			t.Fatalf("issuers %+v", ready)
		}
		keys[pub] = true
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	k := hex.EncodeToString([]byte("evidence-main-test-key-01"))
	seed := strings.Repeat("ab", 32)
	others := []string{"-human-issuer-seed-hex", strings.Repeat("cd", 32), "-review-issuer-seed-hex", strings.Repeat("ef", 32)}
	for name, args := range map[string][]string{
		"NoKey":            append([]string{"-issuer-seed-hex", seed}, others...),
		"NoSeed":           append([]string{"-key-hex", k}, others...),
		"ShortSeed":        append([]string{"-key-hex", k, "-issuer-seed-hex", "abcd"}, others...),
		"LongSeed":         append([]string{"-key-hex", k, "-issuer-seed-hex", seed + "ab"}, others...),
		"BadIssuer":        append([]string{"-key-hex", k, "-issuer-seed-hex", seed, "-issuer", "a b"}, others...),
		"NoHumanSeed":      {"-key-hex", k, "-issuer-seed-hex", seed, "-review-issuer-seed-hex", strings.Repeat("ef", 32)},
		"NoReviewSeed":     {"-key-hex", k, "-issuer-seed-hex", seed, "-human-issuer-seed-hex", strings.Repeat("cd", 32)},
		"HumanSeedReused":  {"-key-hex", k, "-issuer-seed-hex", seed, "-human-issuer-seed-hex", seed, "-review-issuer-seed-hex", strings.Repeat("ef", 32)},
		"BadHumanIssuerID": append([]string{"-key-hex", k, "-issuer-seed-hex", seed, "-human-issuer", "a b"}, others...),
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(context.Background(), args, func(string) string { return "" }, &bytes.Buffer{}); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
