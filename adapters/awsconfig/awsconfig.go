// Package awsconfig loads the full shared AWS configuration for the
// command-line tools and tests: environment, shared config and credentials
// files, profiles and every credential source of the SDK's default chain.
// The Lambda functions do not use it (they read only the environment Lambda
// sets, see awsclient.FromEnv): the default chain links the STS, SSO,
// sign-in and instance-metadata clients, about 1.3 MB of each bootstrap.
package awsconfig

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Load reads the shared AWS configuration (region, credentials, endpoint
// overrides) from the environment and the shared config files. Extra
// options are passed to config.LoadDefaultConfig after the defaults.
func Load(ctx context.Context, opts ...func(*config.LoadOptions) error) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("awsconfig: load AWS config: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, fmt.Errorf("awsconfig: no AWS region configured (set AWS_REGION)")
	}
	return cfg, nil
}
