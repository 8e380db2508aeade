package signing

import "testing"

func TestDecodeB64URLCanonicalRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 31, 32, 64} {
		raw := make([]byte, n)
		for i := range raw {
			raw[i] = byte(0xff - i)
		}
		got, err := DecodeB64URL(b64.EncodeToString(raw))
		if err != nil || string(got) != string(raw) {
			t.Fatalf("%d bytes: %x, %v", n, got, err)
		}
	}
}
