package signing

import (
	"crypto/ed25519"
	"strings"
	"testing"
)

// reencodings returns encodings of the same bytes as the canonical unpadded
// base64url segment seg that a lenient decoder accepts or that other
// alphabets produce: the last character with a non-zero unused bit,
// padding, the standard alphabet, and line breaks inside. Each differs
// from seg as a string.
func reencodings(t *testing.T, seg string) map[string]string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	if len(seg)%4 == 0 {
		t.Fatalf("segment %q has no unused bits", seg)
	}
	last := strings.IndexByte(alphabet, seg[len(seg)-1])
	out := map[string]string{
		"unused bits set": seg[:len(seg)-1] + string(alphabet[last^1]),
		"padding":         seg + strings.Repeat("=", 4-len(seg)%4),
		"CRLF inside":     seg[:len(seg)/2] + "\r\n" + seg[len(seg)/2:],
		"LF at the end":   seg + "\n",
	}
	std := strings.NewReplacer("-", "+", "_", "/").Replace(seg)
	if std == seg {
		t.Fatalf("segment %q has no URL-only character; pick another input", seg)
	}
	out["standard alphabet"] = std
	return out
}

// TestReceiptReencodingsRefused: a receipt verified under other encodings
// of its signature (non-zero trailing bits, line breaks), so one receipt
// had several strings, and the approval id (which hashes the receipt
// string) could be varied by re-encoding it.
func TestReceiptReencodingsRefused(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := priv.Public().(ed25519.PublicKey)
	var receipt string
	var parts []string
	for i := 0; ; i++ {
		receipt = SignReceipt(priv, []byte(`{"kind":"quality","n":`+strings.Repeat("1", i+1)+`}`))
		parts = strings.Split(receipt, ".")
		if strings.ContainsAny(parts[2], "-_") {
			break
		}
	}
	if _, err := OpenReceipt(pub, receipt); err != nil {
		t.Fatalf("canonical receipt: %v", err)
	}
	for name, sig := range reencodings(t, parts[2]) {
		bad := parts[0] + "." + parts[1] + "." + sig
		if _, err := OpenReceipt(pub, bad); err == nil {
			t.Errorf("%s: re-encoded receipt %q verifies", name, bad)
		}
	}
	for name, payload := range reencodings(t, "eyJraW5kIjoicXVhbGl0eSJ9-_w") {
		if _, err := PeekReceiptPayload("v1." + payload + "." + parts[2]); err == nil {
			t.Errorf("%s: PeekReceiptPayload decodes %q", name, payload)
		}
	}
}
