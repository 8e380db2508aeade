package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/contract"
)

const keyHex = "6c6f63616c65666c6f772d636d732d746573742d6b65792d3030303030303031"

func baseEnv() map[string]string {
	return map[string]string{
		envMonitorTable: "lf-monitor",
		envPollQueueURL: "http://127.0.0.1:4566/000000000000/lf-poll",
		envEventBus:     "lf-bus",
		envCMSBaseURL:   "https://cms.example",
		envCMSKeyHex:    keyHex,
		envEventKeyHex:  keyHex,
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	env := baseEnv()
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.CMSTimeout != 10*time.Second || c.Monitor.Lease != 600*time.Second || c.Monitor.PollInterval != 30*time.Second ||
		c.Monitor.BaseDelay != 5*time.Second || c.Monitor.MaxDelay != 300*time.Second || c.Monitor.MaxConsecutiveFailures != 5 ||
		c.Monitor.HintMinGap != 5*time.Second {
		t.Fatalf("defaults %+v", c)
	}
	if !strings.HasPrefix(c.Monitor.WorkerID, "poller-") {
		t.Fatalf("worker id %q", c.Monitor.WorkerID)
	}
}

func TestLoadConfigOverrides(t *testing.T) {
	env := baseEnv()
	env[envCMSTimeout] = "3s"
	env[envLease] = "2m"
	env[envPollInterval] = "45s"
	env[envMaxFailures] = "7"
	env[envConcurrency] = "8"
	env[envWorkerID] = "worker-a"
	env[envHintMinGap] = "250ms"
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.CMSTimeout != 3*time.Second || c.Monitor.Lease != 2*time.Minute || c.Monitor.PollInterval != 45*time.Second ||
		c.Monitor.MaxConsecutiveFailures != 7 || c.Concurrency != 8 || c.Monitor.WorkerID != "worker-a" ||
		c.Monitor.HintMinGap != 250*time.Millisecond {
		t.Fatalf("overrides %+v", c)
	}
}

func TestLoadConfigInvalid(t *testing.T) {
	tests := []struct {
		name string
		edit func(map[string]string)
		want string
	}{
		{"no table", func(e map[string]string) { delete(e, envMonitorTable) }, envMonitorTable},
		{"no queue", func(e map[string]string) { delete(e, envPollQueueURL) }, envPollQueueURL},
		{"no bus", func(e map[string]string) { delete(e, envEventBus) }, envEventBus},
		{"no cms", func(e map[string]string) { delete(e, envCMSBaseURL) }, envCMSBaseURL},
		{"no key", func(e map[string]string) { delete(e, envCMSKeyHex) }, "exactly one"},
		{"two keys", func(e map[string]string) { e[envCMSKeyARN] = "arn:aws:secretsmanager:x" }, "exactly one"},
		{"bad arn", func(e map[string]string) { delete(e, envCMSKeyHex); e[envCMSKeyARN] = "secret" }, "ARN"},
		{"key not hex", func(e map[string]string) { e[envCMSKeyHex] = "zz" }, "not hex"},
		{"key short", func(e map[string]string) { e[envCMSKeyHex] = "abcd" }, "at least"},
		{"no event key", func(e map[string]string) { delete(e, envEventKeyHex) }, envEventKey},
		{"event key short", func(e map[string]string) { e[envEventKeyHex] = "abcd" }, "at least"},
		{"v1 signatures neither accept nor refuse", func(e map[string]string) { e[envEventV1] = "yes" }, envEventV1 + ` ("yes") must be accept or refuse`},
		{"v1 signatures as 0 (the retired form)", func(e map[string]string) { e[envEventV1] = "0" }, envEventV1},
		{"retired refuse-v1 variable", func(e map[string]string) { e[contract.EnvEventRefuseV1Retired] = "0" }, envEventV1 + "=accept"},
		{"bad duration", func(e map[string]string) { e[envLease] = "ten minutes" }, envLease},
		{"bad integer", func(e map[string]string) { e[envMaxFailures] = "five" }, envMaxFailures},
		{"lease too short", func(e map[string]string) { e[envLease] = "10s" }, "lifecycle_monitor.lease_too_short"},
		{"too many failures", func(e map[string]string) { e[envMaxFailures] = "21" }, "max_failures_invalid"},
		{"base over max", func(e map[string]string) { e[envBaseDelay] = "10m" }, "delay_invalid"},
		{"concurrency", func(e map[string]string) { e[envConcurrency] = "100000" }, envConcurrency},
		{"worker id", func(e map[string]string) { e[envWorkerID] = "has space" }, "worker_invalid"},
		{"hint gap negative", func(e map[string]string) { e[envHintMinGap] = "-1s" }, envHintMinGap + " (-1s) must be a whole number of milliseconds"},
		{"hint gap sub-millisecond", func(e map[string]string) { e[envHintMinGap] = "1500us" }, "lifecycle_monitor.hint_gap_invalid"},
		{"hint gap over a day", func(e map[string]string) { e[envHintMinGap] = "25h" }, envHintMinGap},
		{"hint gap not a duration", func(e map[string]string) { e[envHintMinGap] = "5" }, envHintMinGap},
		{"log level", func(e map[string]string) { e[envLogLevel] = "LOUD" }, envLogLevel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := baseEnv()
			tt.edit(env)
			_, err := loadConfig(func(k string) string { return env[k] })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want mention of %q", err, tt.want)
			}
			if strings.Contains(err.Error(), keyHex) {
				t.Fatal("error leaks the key")
			}
		})
	}
}

type fakeSecrets struct {
	out *secretsmanager.GetSecretValueOutput
	err error
}

func (f fakeSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	if *in.SecretId != "arn:aws:secretsmanager:us-east-1:1:secret:cms" {
		return nil, errors.New("wrong secret id")
	}
	return f.out, f.err
}

func TestCMSKeyFromSecret(t *testing.T) {
	c := config{CMSKey: secretkey.Source{Stem: envCMSKey, SecretARN: "arn:aws:secretsmanager:us-east-1:1:secret:cms"}}
	raw := []byte("localeflow-cms-test-key-00000001")
	tests := []struct {
		name string
		sm   fakeSecrets
		ok   bool
	}{
		{"hex string", fakeSecrets{out: &secretsmanager.GetSecretValueOutput{SecretString: aws.String(keyHex + "\n")}}, true},
		{"binary", fakeSecrets{out: &secretsmanager.GetSecretValueOutput{SecretBinary: raw}}, true},
		{"short binary", fakeSecrets{out: &secretsmanager.GetSecretValueOutput{SecretBinary: []byte("x")}}, false},
		{"not hex", fakeSecrets{out: &secretsmanager.GetSecretValueOutput{SecretString: aws.String("plain words")}}, false},
		{"empty", fakeSecrets{out: &secretsmanager.GetSecretValueOutput{}}, false},
		{"api error", fakeSecrets{err: errors.New("denied")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := c.LoadCMSKey(context.Background(), tt.sm)
			if (err == nil) != tt.ok {
				t.Fatalf("err %v", err)
			}
			if tt.ok && string(key) != string(raw) {
				t.Fatalf("key %x", key)
			}
		})
	}
}
