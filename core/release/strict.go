package release

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/localeflow/localeflow/core"
)

// fields is one JSON object whose key set has been checked.
type fields map[string]json.RawMessage

// object decodes raw as a JSON object whose keys are exactly required plus
// any of optional. Any violation (not an object, duplicate or unknown key,
// missing key) is Fail(code).
func object(raw []byte, code string, required []string, optional ...string) (fields, error) {
	f, err := anyObject(raw, code)
	if err != nil {
		return nil, err
	}
	allowed := make(map[string]bool, len(required)+len(optional))
	for _, k := range required {
		if _, ok := f[k]; !ok {
			return nil, core.Fail(code)
		}
		allowed[k] = true
	}
	for _, k := range optional {
		allowed[k] = true
	}
	for k := range f {
		if !allowed[k] {
			return nil, core.Fail(code)
		}
	}
	return f, nil
}

// anyObject decodes raw as a JSON object with any keys.
func anyObject(raw []byte, code string) (fields, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, core.Fail(code)
	}
	// CanonicalizeJSON refuses duplicate keys, invalid UTF-8, trailing data
	// and absurd nesting before the map hides them.
	if _, err := core.CanonicalizeJSON(raw); err != nil {
		return nil, core.Wrap(code, false, err)
	}
	var f fields
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, core.Wrap(code, false, err)
	}
	return f, nil
}

func (f fields) has(name string) bool {
	_, ok := f[name]
	return ok
}

func (f fields) isNull(name string) bool {
	return bytes.Equal(bytes.TrimSpace(f[name]), []byte("null"))
}

// str decodes a JSON string (never null).
func (f fields) str(name, code string) (string, error) {
	raw := bytes.TrimSpace(f[name])
	if len(raw) == 0 || raw[0] != '"' {
		return "", core.Fail(code)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", core.Wrap(code, false, err)
	}
	return s, nil
}

func (f fields) token(name, code string) (string, error) {
	s, err := f.str(name, code)
	if err != nil {
		return "", err
	}
	return core.Token(s, code)
}

func (f fields) sha(name, code string) (string, error) {
	s, err := f.str(name, code)
	if err != nil {
		return "", err
	}
	if !core.ValidSHA256(s) {
		return "", core.Fail(code)
	}
	return s, nil
}

func (f fields) boolean(name, code string) (bool, error) {
	switch string(bytes.TrimSpace(f[name])) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, core.Fail(code)
}

// integer decodes a JSON integer in [min, max]; 1.0 and 1e0 are refused
// because the contract's integers are written as integers.
func (f fields) integer(name, code string, lo, hi int64) (int64, error) {
	raw := string(bytes.TrimSpace(f[name]))
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, core.Fail(code)
	}
	return n, nil
}

// tokenMap decodes an object of token → token with at most limit entries.
func (f fields) tokenMap(name, code string, limit int) (map[string]string, error) {
	raw := bytes.TrimSpace(f[name])
	if len(raw) == 0 || raw[0] != '{' {
		return nil, core.Fail(code)
	}
	inner, err := anyObject(raw, code)
	if err != nil {
		return nil, err
	}
	if len(inner) > limit {
		return nil, core.Fail(code)
	}
	out := make(map[string]string, len(inner))
	for k := range inner {
		if !core.ValidToken(k) {
			return nil, core.Fail(code)
		}
		v, err := inner.token(k, code)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// nullableObject returns the canonical JSON of an object member, or nil for
// null.
func (f fields) nullableObject(name, code string, maxBytes int) (json.RawMessage, error) {
	raw := bytes.TrimSpace(f[name])
	if f.isNull(name) {
		return nil, nil
	}
	if len(raw) == 0 || raw[0] != '{' || len(raw) > maxBytes {
		return nil, core.Fail(code)
	}
	c, err := core.CanonicalizeJSON(raw)
	if err != nil {
		return nil, core.Wrap(code, false, err)
	}
	return c, nil
}
