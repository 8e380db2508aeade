package release_test

import (
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// sigReencodings returns other encodings of a token's last segment (an
// Ed25519 signature: 86 characters, 4 unused bits): a non-zero unused bit,
// padding, the standard alphabet, line breaks.
func sigReencodings(t *testing.T, token string) map[string]string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.LastIndexByte(token, '.')
	head, sig := token[:i+1], token[i+1:]
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	out := map[string]string{
		"unused bits set": head + sig[:len(sig)-1] + string(alphabet[last^1]),
		"padding":         head + sig + "==",
		"CRLF inside":     head + sig[:40] + "\r\n" + sig[40:],
		"LF at the end":   head + sig + "\n",
	}
	if std := strings.NewReplacer("-", "+", "_", "/").Replace(sig); std != sig {
		out["standard alphabet"] = head + std
	}
	return out
}

// TestReencodedReceiptRefused: a receipt re-encoded with non-zero trailing
// bits or line breaks in its signature verified, so one issuer receipt had
// several accepted strings (and the approval id, which hashes the receipt
// string, several values). Each is now receipt.signature_invalid.
func TestReencodedReceiptRefused(t *testing.T) {
	fx := releasetest.NewFixture()
	v := fx.Verifiers()
	req := request("evt-1")
	var receipt string
	for ttl := time.Hour; ; ttl += time.Second {
		receipt = fx.Receipt(release.KindQuality, req.RequestID, req.ResultSHA256, t0, ttl)
		if sig := receipt[strings.LastIndexByte(receipt, '.')+1:]; strings.ContainsAny(sig, "-_") {
			break
		}
	}
	if _, err := v.Quality.Verify(receipt, req.RequestID, req.ResultSHA256, t0); err != nil {
		t.Fatalf("canonical receipt: %v", err)
	}
	for name, bad := range sigReencodings(t, receipt) {
		t.Run(name, func(t *testing.T) {
			_, err := v.Quality.Verify(bad, req.RequestID, req.ResultSHA256, t0)
			wantCode(t, err, release.CodeReceiptSignature)
		})
	}
}

// TestReencodedTokenRefused: approval tokens (and delivery bundles) opened
// under other encodings of their signature; they are token.invalid now.
func TestReencodedTokenRefused(t *testing.T) {
	approval, _ := releasetest.NewFixture().Authorities()
	var token string
	for n := 0; ; n++ {
		var err error
		token, err = approval.Sign([]byte(`{"n":` + strings.Repeat("7", n+1) + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if sig := token[strings.LastIndexByte(token, '.')+1:]; strings.ContainsAny(sig, "-_") {
			break
		}
	}
	if _, err := approval.Open(token); err != nil {
		t.Fatalf("canonical token: %v", err)
	}
	for name, bad := range sigReencodings(t, token) {
		t.Run(name, func(t *testing.T) {
			_, err := approval.Open(bad)
			wantCode(t, err, "token.invalid")
		})
	}
}
