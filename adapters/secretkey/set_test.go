package secretkey_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/secretkey"
)

// TestLoadSetForRotation: a secret held exactly one key, so a rotation
// dropped whatever the other side still signed with the previous one; a
// secret "current,previous" now gives both (current first), and Load
// still returns the current key.
func TestLoadSetForRotation(t *testing.T) {
	cur, prev := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	src := secretkey.Source{Stem: stem, SecretARN: arn}
	sm := fakeSecrets{out: &secretsmanager.GetSecretValueOutput{SecretString: aws.String(hex.EncodeToString(cur) + ", " + hex.EncodeToString(prev))}}
	keys, err := src.LoadSet(context.Background(), sm, "event", secretkey.MinBytes(16))
	if err != nil || len(keys) != 2 || !bytes.Equal(keys[0], cur) || !bytes.Equal(keys[1], prev) {
		t.Fatalf("set %x, %v", keys, err)
	}
	one, err := src.Load(context.Background(), sm, "event", secretkey.MinBytes(16))
	if err != nil || !bytes.Equal(one, cur) {
		t.Fatalf("Load %x, %v", one, err)
	}
	for name, s := range map[string]string{
		"duplicate": hex.EncodeToString(cur) + "," + hex.EncodeToString(cur),
		"too many":  strings.Repeat(hex.EncodeToString(cur)+",", 4) + hex.EncodeToString(prev),
		"short":     hex.EncodeToString(cur) + ",abcd",
		"empty":     hex.EncodeToString(cur) + ",",
	} {
		if _, err := secretkey.DecodeHexSet(s, secretkey.MinBytes(16)); err == nil {
			t.Errorf("%s key set accepted", name)
		}
	}
}
