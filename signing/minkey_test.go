package signing

import "testing"

// TestShortHMACKeysVerifyNothing: an empty or 15-byte key must not verify
// its own signatures (before, an empty key signed and verified).
func TestShortHMACKeysVerifyNothing(t *testing.T) {
	msg := []byte("message")
	for _, n := range []int{0, 1, MinHMACKeyBytes - 1} {
		key := make([]byte, n)
		if VerifyHMAC(key, msg, HMAC(key, msg)) {
			t.Errorf("a %d-byte key verified its own HMAC", n)
		}
		if VerifyEvent(key, msg, SignEvent(key, msg)) {
			t.Errorf("a %d-byte key verified its own event signature", n)
		}
		if VerifyRequest(key, "GET", "/p", "r", "1", nil, SignRequest(key, "GET", "/p", "r", "1", nil)) {
			t.Errorf("a %d-byte key verified its own request signature", n)
		}
	}
	key := make([]byte, MinHMACKeyBytes)
	if !VerifyHMAC(key, msg, HMAC(key, msg)) {
		t.Error("a 16-byte key does not verify its own HMAC")
	}
}
