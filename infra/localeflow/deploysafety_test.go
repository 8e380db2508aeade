package localeflow_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/infra/localeflow"
)

// busPattern is what an event rule or archive on a bus matches: the
// values of source, detail-type and resources (nil: any value).
type busPattern struct {
	owner, id                     string
	source, detailType, resources []string
}

// overlaps says whether one event could match both patterns: every field
// both constrain has a common value.
func (p busPattern) overlaps(q busPattern) bool {
	common := func(a, b []string) bool {
		if a == nil || b == nil {
			return true
		}
		for _, v := range a {
			if slices.Contains(b, v) {
				return true
			}
		}
		return false
	}
	return common(p.source, q.source) && common(p.detailType, q.detailType) && common(p.resources, q.resources)
}

// TestTwoInstancesOnOneHostBusConsumeDisjointEvents: a team's app with two
// localeflow instances on its one bus. Every rule and archive of one
// instance matches events no rule or archive of the other matches (each
// instance's inputs carry its contract.DeploymentResource), so neither
// routes, quarantines or archives the other's inputs.
func TestTwoInstancesOnOneHostBusConsumeDisjointEvents(t *testing.T) {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("TeamPlatform"), nil)
	bus := awsevents.NewEventBus(stack, jsii.String("TeamBus"), &awsevents.EventBusProps{EventBusName: jsii.String("team-bus")})
	prefixes := []string{"team-a", "team-b"}
	for _, prefix := range prefixes {
		if _, err := localeflow.New(stack, "Lf-"+prefix, &localeflow.Props{
			Prefix: prefix, AssetDir: localeflow.AssetDirForTests(), ReceiptIssuers: localeflow.IssuersForTests(),
			CMSBaseURL: "https://cms.team.example", EvidenceBaseURL: "https://evidence.team.example",
			HostProps: localeflow.HostProps{EventBus: bus},
		}); err != nil {
			t.Fatalf("New %s: %v", prefix, err)
		}
	}
	tmpl := teamTemplate(t, stack)
	strs := func(v any) []string {
		if v == nil {
			return nil
		}
		var out []string
		for _, s := range v.([]any) {
			out = append(out, s.(string))
		}
		return out
	}
	var patterns []busPattern
	for id, r := range tmpl["Resources"].(map[string]any) {
		res := r.(map[string]any)
		props, _ := res["Properties"].(map[string]any)
		var name string
		switch res["Type"] {
		case "AWS::Events::Rule":
			name, _ = props["Name"].(string)
		case "AWS::Events::Archive":
			name, _ = props["ArchiveName"].(string)
		default:
			continue
		}
		pattern, ok := props["EventPattern"].(map[string]any)
		if !ok || isKeyStateRule(props) {
			continue // a schedule, or the key's CloudTrail rule: no bus events
		}
		owner := ""
		for _, p := range prefixes {
			if strings.HasPrefix(name, p+"-") {
				owner = p
			}
		}
		if owner == "" {
			t.Fatalf("%s %s belongs to neither instance", id, name)
		}
		patterns = append(patterns, busPattern{owner: owner, id: id, source: strs(pattern["source"]),
			detailType: strs(pattern["detail-type"]), resources: strs(pattern["resources"])})
	}
	perOwner := map[string]int{}
	for _, p := range patterns {
		perOwner[p.owner]++
		if want := []string{contract.DeploymentResource(p.owner)}; !slices.Equal(p.resources, want) {
			t.Errorf("%s (%s) matches resources %v, want %v", p.id, p.owner, p.resources, want)
		}
	}
	// Every input detail-type has a rule, plus the archive.
	for _, prefix := range prefixes {
		if perOwner[prefix] < 3 {
			t.Fatalf("%s has %d bus patterns", prefix, perOwner[prefix])
		}
	}
	for _, p := range patterns {
		for _, q := range patterns {
			if p.owner != q.owner && p.overlaps(q) {
				t.Errorf("%s (%s) and %s (%s) match a common event: %+v %+v", p.id, p.owner, q.id, q.owner, p, q)
			}
		}
	}
}
