package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Prefix of every HMAC signature value.
const hmacPrefix = "v1="

// MinHMACKeyBytes is the shortest HMAC key that signs or verifies anything:
// a shorter key (an empty one included) verifies nothing.
const MinHMACKeyBytes = 16

// Header names of the signed HTTP contracts.
const (
	HeaderRequestID = "X-Localeflow-Request-Id"
	HeaderTimestamp = "X-Localeflow-Timestamp"
	HeaderSignature = "X-Localeflow-Signature"
)

// HMAC returns "v1=" + hex HMAC-SHA256(key, message).
func HMAC(key, message []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(message)
	return hmacPrefix + hex.EncodeToString(mac.Sum(nil))
}

// VerifyHMAC reports whether signature is the v1 HMAC of message under key,
// comparing in constant time. Malformed values are simply not valid, and
// nothing is valid under a key shorter than MinHMACKeyBytes.
func VerifyHMAC(key, message []byte, signature string) bool {
	return verifyPrefixed(key, message, signature, hmacPrefix)
}

func verifyPrefixed(key, message []byte, signature, prefix string) bool {
	if len(key) < MinHMACKeyBytes {
		return false
	}
	hexPart, ok := strings.CutPrefix(signature, prefix)
	if !ok || len(hexPart) != sha256.Size*2 {
		return false
	}
	got, err := hex.DecodeString(hexPart)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(message)
	return hmac.Equal(got, mac.Sum(nil))
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// RequestCanonical is the string signed for a request without a body (the
// CMS lifecycle GET): "METHOD\nPATH\nREQUEST_ID\nTIMESTAMP".
func RequestCanonical(method, path, requestID, timestamp string) string {
	return method + "\n" + path + "\n" + requestID + "\n" + timestamp
}

// BodyRequestCanonical is the string signed for a request with a body (CMS
// delivery POST, evidence POST): the request canonical plus "\n" + hex
// sha256(body).
func BodyRequestCanonical(method, path, requestID, timestamp string, body []byte) string {
	return RequestCanonical(method, path, requestID, timestamp) + "\n" + sha256Hex(body)
}

// ResponseCanonical is the string a server signs for its response:
// "REQUEST_ID\n" + hex sha256(body).
func ResponseCanonical(requestID string, body []byte) string {
	return requestID + "\n" + sha256Hex(body)
}

// SignRequest signs a request; body nil means a request without a body.
func SignRequest(key []byte, method, path, requestID, timestamp string, body []byte) string {
	if body == nil {
		return HMAC(key, []byte(RequestCanonical(method, path, requestID, timestamp)))
	}
	return HMAC(key, []byte(BodyRequestCanonical(method, path, requestID, timestamp, body)))
}

// VerifyRequest checks a request signature; body nil means no body.
func VerifyRequest(key []byte, method, path, requestID, timestamp string, body []byte, signature string) bool {
	if body == nil {
		return VerifyHMAC(key, []byte(RequestCanonical(method, path, requestID, timestamp)), signature)
	}
	return VerifyHMAC(key, []byte(BodyRequestCanonical(method, path, requestID, timestamp, body)), signature)
}

// SignResponse signs a response body bound to the request id.
func SignResponse(key []byte, requestID string, body []byte) string {
	return HMAC(key, []byte(ResponseCanonical(requestID, body)))
}

// VerifyResponse checks a response signature bound to the request id.
func VerifyResponse(key []byte, requestID string, body []byte, signature string) bool {
	return VerifyHMAC(key, []byte(ResponseCanonical(requestID, body)), signature)
}

// SignEvent signs the exact payload bytes of a signed bus event.
func SignEvent(key []byte, payload []byte) string { return HMAC(key, payload) }

// VerifyEvent checks the signature of a signed bus event's exact payload.
func VerifyEvent(key []byte, payload []byte, signature string) bool {
	return VerifyHMAC(key, payload, signature)
}
