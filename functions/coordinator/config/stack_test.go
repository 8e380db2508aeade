package config_test

import (
	"reflect"
	"testing"

	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/functions/coordinator/config"
)

// TestDefaultConfigIsTheDeployedOne: release.DefaultConfig (what the core
// tests and the simulation's reference run) is exactly what the loader
// makes of the stack's environment with no operator setting.
func TestDefaultConfigIsTheDeployedOne(t *testing.T) {
	got, err := config.DeployedRelease("worker-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := release.DefaultConfig(config.DefaultRevision, "worker-1"); !reflect.DeepEqual(got, want) {
		t.Fatalf("deployed\n%+v\nrelease.DefaultConfig\n%+v", got, want)
	}
}

// TestStackEnvIsLoaded: the settings an operator gives reach the
// configuration, and a refused one is refused (the loader runs).
func TestStackEnvIsLoaded(t *testing.T) {
	got, err := config.DeployedRelease("worker-1", map[string]string{"LOCALEFLOW_EVIDENCE_MAX_ATTEMPTS": "7"})
	if err != nil || got.EvidenceMaxAttempts != 7 {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := config.DeployedRelease("worker-1", map[string]string{"LOCALEFLOW_EVIDENCE_MAX_ATTEMPTS": "0"}); err == nil {
		t.Fatal("a refused setting was loaded")
	}
}
