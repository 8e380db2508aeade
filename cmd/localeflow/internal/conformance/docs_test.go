package conformance_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/cmd/localeflow/internal/conformance"
)

// TestDocsListEveryCheck keeps docs/integrating.md "Checking your servers"
// in step with the checks: each table row names one check and its level,
// in report order.
func TestDocsListEveryCheck(t *testing.T) {
	raw, err := os.ReadFile("../../../../docs/integrating.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "## Checking your servers")
	end := strings.Index(doc[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("section \"Checking your servers\" not found")
	}
	section := doc[start : start+1+end]
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9_.]+)` \\| (MUST|SHOULD) \\|")
	var got []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		got = append(got, m[1]+" "+m[2])
	}
	var want []string
	for _, list := range [][]struct{ Name, Level string }{conformance.CMSChecks, conformance.EvidenceChecks} {
		for _, c := range list {
			want = append(want, c.Name+" "+c.Level)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("docs/integrating.md lists\n%s\nthe code has\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDocsNameEveryCode: every code of the checker is in the guide.
func TestDocsNameEveryCode(t *testing.T) {
	raw, err := os.ReadFile("../../../../docs/integrating.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(raw)), " ")
	for _, code := range []string{conformance.CodeUnreachable, conformance.CodeStatus, conformance.CodeNotRefused, conformance.CodeWrongRefusal,
		conformance.CodeRetryAfter, conformance.CodeNotIdempotent, conformance.CodeSignature, conformance.CodeBusyNotBusy,
		conformance.CodeRequestBuild, conformance.CodeReviewerUnbound, conformance.CodeRefusalReason} {
		if !strings.Contains(doc, "`"+code+"`") {
			t.Errorf("docs/integrating.md does not name %s", code)
		}
	}
}
