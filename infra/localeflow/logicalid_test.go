package localeflow

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
)

// TestStackKeepsLogicalIDs: NewStack puts the construct under
// StackConstructID, which CDK leaves out of logical IDs, so every resource
// and output keeps the logical ID it had when the stack was built without a
// construct (testdata/logical-ids.txt, from that template). Under any other
// id every logical ID would change, and CloudFormation would replace every
// resource of an existing deployment (new, empty tables). The stack is
// named like the app's default stack: some IDs (event source mappings,
// invoke permissions) embed the stack's name.
func TestStackKeepsLogicalIDs(t *testing.T) {
	raw, err := os.ReadFile("testdata/logical-ids.txt")
	if err != nil {
		t.Fatal(err)
	}
	lf, err := NewStack(awscdk.NewApp(nil), "Localeflow", &StackProps{Props: *testProps()})
	if err != nil {
		t.Fatal(err)
	}
	var template assertions.Template
	noPanic(t, func() { template = assertions.Template_FromStack(lf.Stack(), nil) })
	var tmpl map[string]any
	if err := json.Unmarshal([]byte(mustJSON(t, template.ToJSON())), &tmpl); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		want++
		section, id, _ := strings.Cut(line, "/")
		if m, _ := tmpl[section].(map[string]any); m[id] == nil {
			t.Errorf("%s %s is gone: its logical ID changed", section, id)
		}
	}
	if want < 70 {
		t.Fatalf("only %d logical IDs listed", want)
	}
}
