// Package contracttest checks code against the wire contract in tests.
package contracttest

import (
	"slices"
	"testing"

	"github.com/localeflow/localeflow/contract"
)

// RequireReadsExactly runs read (a function's config loader, given a
// getenv) once per named environment and fails t unless the variables it
// asks for are exactly the names of list (listName is for the message),
// whatever the environment holds: an empty one, a complete and valid one.
func RequireReadsExactly(t *testing.T, listName string, list []contract.EnvVar, envs map[string]map[string]string, read func(getenv func(string) string)) {
	t.Helper()
	want := contract.Names(list)
	slices.Sort(want)
	for name, env := range envs {
		asked := map[string]bool{}
		read(func(k string) string {
			asked[k] = true
			return env[k]
		})
		var got []string
		for k := range asked {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s environment: the loader reads\n%v\n%s lists\n%v", name, got, listName, want)
		}
	}
}
