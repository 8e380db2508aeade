package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// CodeCanonicalInvalid is returned for a value that has no canonical JSON form
// (invalid UTF-8, duplicate keys, non-finite numbers, trailing data).
const CodeCanonicalInvalid = "canonical.json.invalid"

// CodeCanonicalLoneSurrogate is returned for a string escape that names half
// of a UTF-16 surrogate pair ("\ud800" alone, or a low surrogate first). Such
// a string is not I-JSON; decoding would turn it into U+FFFD, so two
// different texts would share one canonical form and one hash.
const CodeCanonicalLoneSurrogate = "canonical.json.lone_surrogate"

// maxCanonicalDepth bounds nesting so hostile input cannot exhaust the stack.
const maxCanonicalDepth = 64

// Canonical returns the RFC 8785 (JCS) canonical JSON of v. v is first
// encoded with encoding/json, so struct tags apply.
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, Wrap(CodeCanonicalInvalid, false, err)
	}
	return CanonicalizeJSON(raw)
}

// CanonicalizeJSON returns the RFC 8785 canonical form of one JSON text:
// object members sorted by their UTF-16 code units, no insignificant
// whitespace, numbers in the ECMAScript shortest form, strings with the
// minimal escapes. Duplicate member names are refused (I-JSON).
func CanonicalizeJSON(raw []byte) ([]byte, error) {
	if !utf8.Valid(raw) {
		return nil, Fail(CodeCanonicalInvalid)
	}
	if hasLoneSurrogate(raw) {
		return nil, Fail(CodeCanonicalLoneSurrogate)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	if err := canonicalValue(dec, &out, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, Fail(CodeCanonicalInvalid)
	}
	return out.Bytes(), nil
}

// hasLoneSurrogate reports whether a string in raw has a \u escape for a
// surrogate that is not part of a high-then-low pair. raw is valid UTF-8, and
// UTF-8 cannot encode surrogates, so escapes are the only way to write one.
// Malformed escapes are left to the decoder, which refuses them.
func hasLoneSurrogate(raw []byte) bool {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !inString {
			inString = c == '"'
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 < len(raw) && raw[i+1] == 'u' {
				u, ok := hexUnit(raw, i+2)
				switch {
				case !ok || !utf16.IsSurrogate(rune(u)):
				case u >= 0xdc00:
					return true // low surrogate without a high one
				default:
					low, ok := hexUnit(raw, i+8)
					if i+7 >= len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' || !ok || low < 0xdc00 || low > 0xdfff {
						return true // high surrogate without a low one
					}
					i += 6
				}
				i += 5
			} else {
				i++ // the escaped character, which may be '"' or '\\'
			}
		}
	}
	return false
}

// hexUnit reads the four hex digits at raw[at:at+4] as one UTF-16 code unit.
func hexUnit(raw []byte, at int) (uint16, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(raw[at:at+4]), 16, 16)
	return uint16(v), err == nil
}

func canonicalValue(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	if depth > maxCanonicalDepth {
		return Fail(CodeCanonicalInvalid)
	}
	tok, err := dec.Token()
	if err != nil {
		return Wrap(CodeCanonicalInvalid, false, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return canonicalObject(dec, out, depth)
		case '[':
			out.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := canonicalValue(dec, out, depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return Wrap(CodeCanonicalInvalid, false, err)
			}
			out.WriteByte(']')
			return nil
		}
		return Fail(CodeCanonicalInvalid)
	case string:
		return writeCanonicalString(out, t)
	case json.Number:
		s, err := canonicalNumber(t)
		if err != nil {
			return err
		}
		out.WriteString(s)
		return nil
	case bool:
		if t {
			out.WriteString("true")
		} else {
			out.WriteString("false")
		}
		return nil
	case nil:
		out.WriteString("null")
		return nil
	}
	return Fail(CodeCanonicalInvalid)
}

type member struct {
	key   string
	units []uint16
	value []byte
}

func canonicalObject(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	var members []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Wrap(CodeCanonicalInvalid, false, err)
		}
		key, ok := tok.(string)
		if !ok || seen[key] {
			return Fail(CodeCanonicalInvalid)
		}
		seen[key] = true
		var value bytes.Buffer
		if err := canonicalValue(dec, &value, depth+1); err != nil {
			return err
		}
		members = append(members, member{key: key, units: utf16.Encode([]rune(key)), value: value.Bytes()})
	}
	if _, err := dec.Token(); err != nil {
		return Wrap(CodeCanonicalInvalid, false, err)
	}
	sort.Slice(members, func(i, j int) bool { return lessUTF16(members[i].units, members[j].units) })
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			out.WriteByte(',')
		}
		if err := writeCanonicalString(out, m.key); err != nil {
			return err
		}
		out.WriteByte(':')
		out.Write(m.value)
	}
	out.WriteByte('}')
	return nil
}

func lessUTF16(a, b []uint16) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

func writeCanonicalString(out *bytes.Buffer, s string) error {
	if !utf8.ValidString(s) {
		return Fail(CodeCanonicalInvalid)
	}
	out.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			out.WriteString(`\"`)
		case '\\':
			out.WriteString(`\\`)
		case '\b':
			out.WriteString(`\b`)
		case '\f':
			out.WriteString(`\f`)
		case '\n':
			out.WriteString(`\n`)
		case '\r':
			out.WriteString(`\r`)
		case '\t':
			out.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(out, `\u%04x`, r)
			} else {
				out.WriteRune(r)
			}
		}
	}
	out.WriteByte('"')
	return nil
}

// canonicalNumber formats n as ECMAScript's Number.prototype.toString does
// for the IEEE-754 double nearest to it (RFC 8785 section 3.2.2.3).
func canonicalNumber(n json.Number) (string, error) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return "", Fail(CodeCanonicalInvalid)
	}
	return canonicalFloat(f)
}

// canonicalFloat is the ECMAScript serialisation of f; NaN and the
// infinities have none in JSON and are refused.
func canonicalFloat(f float64) (string, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return "", Fail(CodeCanonicalInvalid)
	}
	if f == 0 {
		return "0", nil
	}
	abs := math.Abs(f)
	if abs >= 1e-6 && abs < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64), nil
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	// Go writes at least two exponent digits ("1e-07"); ECMAScript does not.
	mant, exp, _ := cutByte(s, 'e')
	sign := exp[0]
	digits := exp[1:]
	for len(digits) > 1 && digits[0] == '0' {
		digits = digits[1:]
	}
	return mant + "e" + string(sign) + digits, nil
}

func cutByte(s string, c byte) (string, string, bool) {
	if i := bytes.IndexByte([]byte(s), c); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// SHA256Hex is the lowercase hex SHA-256 of b.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// HashCanonical is the SHA-256 hex of v's canonical JSON.
func HashCanonical(v any) (string, error) {
	c, err := Canonical(v)
	if err != nil {
		return "", err
	}
	return SHA256Hex(c), nil
}
