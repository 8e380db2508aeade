// Package secretkey loads a function's key material at cold start: from a
// Secrets Manager secret named by ARN (deployed; SecretString holds the key
// as hex, SecretBinary the raw bytes) or from hex in the environment (local
// use only). A key comes from exactly one of the two, read from the
// variables <stem>_SECRET_ARN and <stem>_HEX. Errors name the variables,
// never the key.
package secretkey
