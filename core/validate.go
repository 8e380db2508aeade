package core

import "regexp"

// Patterns of the stable input formats: tokens, error codes (the pattern
// every stable error code matches) and lowercase SHA-256 hex. Tokens are
// identifiers (event, site, plan, job and request ids, versions, lease
// tokens); they never carry free text.
var (
	tokenPattern     = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,256}$`)
	errorCodePattern = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,127}$`)
	sha256Pattern    = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// MaxTokenLength is the longest token; worker ids are limited to
// MaxWorkerIDLength.
const (
	MaxTokenLength    = 256
	MaxWorkerIDLength = 128
)

// ValidToken reports whether s matches [A-Za-z0-9_.:-]{1,256}.
func ValidToken(s string) bool { return tokenPattern.MatchString(s) }

// ValidTokenN reports whether s is a token of at most limit characters.
func ValidTokenN(s string, limit int) bool { return len(s) <= limit && ValidToken(s) }

// ValidErrorCode reports whether s is a stable error code.
func ValidErrorCode(s string) bool { return errorCodePattern.MatchString(s) }

// ValidSHA256 reports whether s is a lowercase hex SHA-256 digest.
func ValidSHA256(s string) bool { return sha256Pattern.MatchString(s) }

// Token returns s when it is a valid token and Fail(code) otherwise.
func Token(s, code string) (string, error) {
	if !ValidToken(s) {
		return "", Fail(code)
	}
	return s, nil
}
