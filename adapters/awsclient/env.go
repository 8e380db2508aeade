package awsclient

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// FromEnv is the AWS configuration of a Lambda function: what the Lambda
// runtime puts in the environment, read the way the SDK's environment
// source reads it, and nothing else (no shared config files, profiles,
// container, instance-metadata, SSO or web-identity credentials, which a
// function never has):
//
//   - region: AWS_REGION, else AWS_DEFAULT_REGION (required);
//   - credentials: AWS_ACCESS_KEY_ID (or AWS_ACCESS_KEY) and
//     AWS_SECRET_ACCESS_KEY (or AWS_SECRET_KEY), required, with
//     AWS_SESSION_TOKEN and AWS_ACCOUNT_ID when set;
//   - endpoints: AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> (the
//     SDK id upper-cased, spaces as underscores, e.g.
//     AWS_ENDPOINT_URL_SECRETS_MANAGER), both ignored when
//     AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true.
//
// Retries, HTTP client and logging are the SDK clients' defaults, as with
// the SDK's default loader when no retry variables are set. Not linking that
// loader keeps the STS, SSO, sign-in and instance-metadata clients out of
// the bootstraps.
func FromEnv() (aws.Config, error) { return fromEnv(os.Getenv) }

func fromEnv(getenv func(string) string) (aws.Config, error) {
	region := first(getenv, "AWS_REGION", "AWS_DEFAULT_REGION")
	if region == "" {
		return aws.Config{}, errors.New("awsclient: no AWS region configured (set AWS_REGION)")
	}
	creds := aws.Credentials{
		AccessKeyID:     first(getenv, "AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY"),
		SecretAccessKey: first(getenv, "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY"),
		SessionToken:    getenv("AWS_SESSION_TOKEN"),
		AccountID:       getenv("AWS_ACCOUNT_ID"),
		Source:          "EnvConfigCredentials",
	}
	if !creds.HasKeys() {
		return aws.Config{}, errors.New("awsclient: no AWS credentials in the environment (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
	}
	src := envSource{getenv}
	if v := getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"); v != "" && !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
		return aws.Config{}, errors.New("awsclient: AWS_IGNORE_CONFIGURED_ENDPOINT_URLS must be true or false")
	}
	cfg := aws.Config{
		Region:        region,
		Credentials:   aws.NewCredentialsCache(staticCredentials{creds}),
		ConfigSources: []any{src},
	}
	if ignore, _, _ := src.GetIgnoreConfiguredEndpoints(context.Background()); !ignore {
		if u := getenv("AWS_ENDPOINT_URL"); u != "" {
			cfg.BaseEndpoint = aws.String(u)
		}
	}
	return cfg, nil
}

func first(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// staticCredentials are the environment's credentials (they do not change
// during the life of a Lambda execution environment).
type staticCredentials struct{ creds aws.Credentials }

func (s staticCredentials) Retrieve(context.Context) (aws.Credentials, error) { return s.creds, nil }

// envSource answers the service clients' questions about configured
// endpoints (they look for these two methods on aws.Config.ConfigSources).
type envSource struct{ getenv func(string) string }

// GetIgnoreConfiguredEndpoints reports AWS_IGNORE_CONFIGURED_ENDPOINT_URLS.
func (s envSource) GetIgnoreConfiguredEndpoints(context.Context) (value, found bool, err error) {
	v := s.getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
	return strings.EqualFold(v, "true"), v != "", nil
}

// GetServiceBaseEndpoint reports AWS_ENDPOINT_URL_<SERVICE> of sdkID.
func (s envSource) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	u := s.getenv("AWS_ENDPOINT_URL_" + strings.ReplaceAll(strings.ToUpper(sdkID), " ", "_"))
	return u, u != "", nil
}
