package awsconfig

import (
	"context"
	"path/filepath"
	"testing"
)

func TestLoadRequiresRegion(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if _, err := Load(context.Background()); err == nil {
		t.Fatal("Load succeeded without a region")
	}
	t.Setenv("AWS_REGION", "us-east-1")
	if cfg, err := Load(context.Background()); err != nil || cfg.Region != "us-east-1" {
		t.Fatalf("Load: %v %q", err, cfg.Region)
	}
}
