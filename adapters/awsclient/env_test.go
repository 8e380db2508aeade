package awsclient

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

func TestFromEnvReadsTheLambdaEnvironment(t *testing.T) {
	isolate(t)
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "eu-central-1")
	t.Setenv("AWS_SESSION_TOKEN", "token")
	t.Setenv("AWS_ACCOUNT_ID", "123456789012")
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", "http://127.0.0.1:4566")
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-central-1" || creds.AccessKeyID != "test" || creds.SecretAccessKey != "test" ||
		creds.SessionToken != "token" || creds.AccountID != "123456789012" {
		t.Fatalf("region %q credentials %+v", cfg.Region, creds)
	}
	// A service whose SDK id has a space: the variable uses an underscore.
	if ep := secretsmanager.NewFromConfig(cfg).Options().BaseEndpoint; ep == nil || *ep != "http://127.0.0.1:4566" {
		t.Fatalf("secrets manager endpoint %v", ep)
	}
}

func TestFromEnvIgnoresConfiguredEndpointsWhenAsked(t *testing.T) {
	isolate(t)
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000")
	t.Setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "TRUE")
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BaseEndpoint != nil {
		t.Fatalf("base endpoint %q", *cfg.BaseEndpoint)
	}
	if opts := DynamoDB(cfg).Options(); opts.BaseEndpoint != nil || opts.DisableValidateResponseChecksum {
		t.Fatalf("dynamodb endpoint %v checksum-off %v", opts.BaseEndpoint, opts.DisableValidateResponseChecksum)
	}
}

func TestFromEnvRefusesIncompleteEnvironment(t *testing.T) {
	for _, tt := range []struct {
		name, unset, set, want string
	}{
		{"no region", "AWS_REGION", "", "region"},
		{"no access key", "AWS_ACCESS_KEY_ID", "", "credentials"},
		{"no secret key", "AWS_SECRET_ACCESS_KEY", "", "credentials"},
		{"bad ignore flag", "", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true or false"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			if tt.unset != "" {
				t.Setenv(tt.unset, "")
			}
			if tt.set != "" {
				t.Setenv(tt.set, "yes")
			}
			if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("FromEnv: %v, want an error about %s", err, tt.want)
			}
		})
	}
}

func TestFromEnvAcceptsTheAlternativeKeyNames(t *testing.T) {
	isolate(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_ACCESS_KEY", "alt-id")
	t.Setenv("AWS_SECRET_KEY", "alt-secret")
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if creds, err := cfg.Credentials.Retrieve(context.Background()); err != nil || creds.AccessKeyID != "alt-id" || creds.SecretAccessKey != "alt-secret" {
		t.Fatalf("credentials %+v %v", creds, err)
	}
}
