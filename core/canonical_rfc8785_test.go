package core

import (
	"encoding/hex"
	"math"
	"strconv"
	"testing"
)

// TestCanonicalNumberRFC8785AppendixB runs the number serialisation samples
// of RFC 8785 Appendix B: each IEEE-754 bit pattern must come out as the
// ECMAScript Number.prototype.toString text.
func TestCanonicalNumberRFC8785AppendixB(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		t.Run(strconv.FormatUint(tt.bits, 16), func(t *testing.T) {
			f := math.Float64frombits(tt.bits)
			got, err := canonicalFloat(f)
			if err != nil || got != tt.want {
				t.Fatalf("canonicalFloat(%#016x) = %q, %v; want %q", tt.bits, got, err, tt.want)
			}
			// The same double written in JSON text, in two spellings, gives
			// the same canonical bytes.
			for _, text := range []string{strconv.FormatFloat(f, 'g', -1, 64), strconv.FormatFloat(f, 'e', 20, 64)} {
				c, err := CanonicalizeJSON([]byte(text))
				if err != nil || string(c) != tt.want {
					t.Errorf("CanonicalizeJSON(%s) = %q, %v; want %q", text, c, err, tt.want)
				}
			}
			// The expected text reads back as the same double.
			if back, err := strconv.ParseFloat(tt.want, 64); err != nil || back != f {
				t.Errorf("%q parses as %v, want %v", tt.want, back, f)
			}
		})
	}
}

// TestCanonicalNumberRefusesNaNAndInfinity covers Appendix B's NaN
// (0x7fffffffffffffff) and Infinity (0x7ff0000000000000): no JSON form.
func TestCanonicalNumberRefusesNaNAndInfinity(t *testing.T) {
	for _, bits := range []uint64{0x7fffffffffffffff, 0x7ff0000000000000, 0xfff0000000000000} {
		f := math.Float64frombits(bits)
		if s, err := canonicalFloat(f); !HasCode(err, CodeCanonicalInvalid) {
			t.Errorf("canonicalFloat(%#016x) = %q, %v; want %s", bits, s, err, CodeCanonicalInvalid)
		}
		if c, err := Canonical(map[string]float64{"n": f}); !HasCode(err, CodeCanonicalInvalid) {
			t.Errorf("Canonical(%#016x) = %q, %v; want %s", bits, c, err, CodeCanonicalInvalid)
		}
	}
	for _, in := range []string{`NaN`, `[Infinity]`, `{"n":-Infinity}`, `1e309`, `-1e309`} {
		if c, err := CanonicalizeJSON([]byte(in)); !HasCode(err, CodeCanonicalInvalid) {
			t.Errorf("CanonicalizeJSON(%s) = %q, %v; want %s", in, c, err, CodeCanonicalInvalid)
		}
	}
}

// TestCanonicalizeJSONRFC8785Examples runs the worked examples of RFC 8785:
// section 3.2.2 (whitespace, numbers, string escaping, with the UTF-8
// bytes of section 3.2.4) and section 3.2.3 (property sorting by UTF-16
// code units).
func TestCanonicalizeJSONRFC8785Examples(t *testing.T) {
	t.Run("3.2.2 serialization", func(t *testing.T) {
		in := `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
		want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
		wantHex := "7b226c69746572616c73223a5b6e756c6c2c747275652c66616c73655d2c226e756d62657273223a5b3333333333333333332e333333333333332c31652b33302c342e352c302e3030322c31652d32375d2c22737472696e67223a22e282ac245c75303030665c6e41274" +
			"25c225c5c5c5c5c222f227d"
		got, err := CanonicalizeJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		if hex.EncodeToString(got) != wantHex {
			t.Fatalf("UTF-8 bytes %x, want %s", got, wantHex)
		}
	})
	t.Run("3.2.3 sorting", func(t *testing.T) {
		in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
		got, err := CanonicalizeJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		wantText := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
		if string(got) != wantText {
			t.Fatalf("got  %s\nwant %s", got, wantText)
		}
	})
}

// TestCanonicalizeJSONRefusesLoneSurrogates: an escaped lone surrogate is
// not I-JSON. Before this was refused, "\ud800" decoded to U+FFFD and so
// canonicalised to the same bytes (and hash) as "\ufffd".
func TestCanonicalizeJSONRefusesLoneSurrogates(t *testing.T) {
	for _, in := range []string{
		`"\ud800"`,              // high alone
		`"\udc00"`,              // low alone
		`"\uDBFFx"`,             // high followed by a plain character
		`"\ud800\u0041"`,        // high followed by a non-surrogate escape
		`"\ud800\ud800"`,        // two highs
		`"\ude00\ud83d"`,        // a pair in the wrong order
		`"a\\\ud800"`,           // after an escaped backslash
		`{"\ud800":1}`,          // in a member name
		`["ok","\\", "\udfff"]`, // after a string ending in an escaped backslash
		`"\ud83d\ude00\ud83d"`,  // a good pair, then a lone high
	} {
		if c, err := CanonicalizeJSON([]byte(in)); !HasCode(err, CodeCanonicalLoneSurrogate) {
			t.Errorf("CanonicalizeJSON(%s) = %q, %v; want %s", in, c, err, CodeCanonicalLoneSurrogate)
		}
	}
	replacement, err := CanonicalizeJSON([]byte(`"\ufffd"`))
	if err != nil || string(replacement) != "\"\ufffd\"" {
		t.Fatalf(`CanonicalizeJSON("\ufffd") = %q, %v`, replacement, err)
	}
	for _, in := range []string{`"\ud83d\ude00"`, `"\uD83D\uDE00"`, `"\\ud800"`, `"\\\\ud800"`, `"\u0075d800"`} {
		if _, err := CanonicalizeJSON([]byte(in)); err != nil {
			t.Errorf("CanonicalizeJSON(%s) = %v, want accepted", in, err)
		}
	}
}
