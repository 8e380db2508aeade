package localeflow

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/infra/localeflow/localeflowtest"
	"github.com/localeflow/localeflow/topology"
)

// assetDir holds a dummy <fn>/bootstrap for every function, created once in
// TestMain (CDK only zips it; nothing executes it).
var assetDir string

func TestMain(m *testing.M) {
	localeflowtest.Main(m, "localeflow-infra-assets-", &assetDir)
}

// issuerKey is an Ed25519 public key in hex (any 32 bytes pass the format
// check; the coordinator validates the key itself).
var issuerKey = strings.Repeat("0f", 32)

// humanKey and reviewKey are the human-review and independent-review
// issuers' keys: each kind has its own.
var (
	humanKey  = strings.Repeat("1e", 32)
	reviewKey = strings.Repeat("2d", 32)
)

// testProps are valid props; tests change what they exercise.
func testProps() *Props {
	return &Props{
		AssetDir:        assetDir,
		CMSBaseURL:      "https://cms.example.com",
		EvidenceBaseURL: "https://evidence.example.com/api/",
		ReceiptIssuers: ReceiptIssuers{
			Quality:           " qa-vendor=" + issuerKey + ", qa-backup=" + strings.Repeat("ab", 32),
			HumanReview:       "review-desk=" + humanKey,
			IndependentReview: "review-beta=" + reviewKey + " ",
		},
	}
}

// synthesized is one synthesized stack: the assertions view and the raw
// template for walking.
type synthesized struct {
	stack    awscdk.Stack
	template assertions.Template
	raw      map[string]any
	topo     topology.Topology
}

// synth builds and synthesizes a stack in a fresh app.
func synth(t testing.TB, props *Props) synthesized {
	t.Helper()
	app := awscdk.NewApp(nil)
	lf, err := NewStack(app, "Test", &StackProps{Props: *props})
	if err != nil {
		t.Fatalf("NewStack: %v", err)
	}
	stack := lf.Stack()
	var s synthesized
	s.stack = stack
	noPanic(t, func() { s.template = assertions.Template_FromStack(stack, nil) })
	raw, err := json.Marshal(s.template.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &s.raw); err != nil {
		t.Fatal(err)
	}
	prefix := props.Prefix
	if prefix == "" {
		prefix = topology.DefaultPrefix
	}
	s.topo = topology.New(prefix)
	return s
}

var (
	defaultOnce  sync.Once
	defaultStack synthesized
)

// defaultSynth is the stack with default props, synthesized once for the
// tests that only read it.
func defaultSynth(t testing.TB) synthesized {
	t.Helper()
	defaultOnce.Do(func() { defaultStack = synth(t, testProps()) })
	if defaultStack.raw == nil {
		t.Fatal("default stack did not synthesize")
	}
	return defaultStack
}

// noPanic runs an assertions call: a failed match panics (through jsii),
// which would abort the whole test binary, so turn it into a test failure.
func noPanic(t testing.TB, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if r := recover(); r != nil {
			t.Fatalf("assertion failed: %v", r)
		}
	}()
	f()
}

func (s synthesized) has(t testing.TB, typ string, props map[string]any) {
	t.Helper()
	noPanic(t, func() { s.template.HasResourceProperties(jsii.String(typ), props) })
}

func (s synthesized) count(t testing.TB, typ string, n int) {
	t.Helper()
	noPanic(t, func() { s.template.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
}

// resources returns logical id → resource of one type.
func (s synthesized) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.raw["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

var cdkHash = regexp.MustCompile(`^[0-9A-F]{8}$`)

// logicalID finds the resource of typ created by the construct with the
// given id: CDK names it <id><8 hex> (L2) or exactly <id> (L1).
func (s synthesized) logicalID(t testing.TB, typ, construct string) string {
	t.Helper()
	var found []string
	for id := range s.resources(typ) {
		if id == construct || (strings.HasPrefix(id, construct) && cdkHash.MatchString(strings.TrimPrefix(id, construct))) {
			found = append(found, id)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s %s: found %v, want exactly one", typ, construct, found)
	}
	return found[0]
}

func (s synthesized) props(t testing.TB, typ, construct string) map[string]any {
	t.Helper()
	return s.resources(typ)[s.logicalID(t, typ, construct)]["Properties"].(map[string]any)
}

func ref(id string) map[string]any { return map[string]any{"Ref": id} }

func getAtt(id, attr string) map[string]any {
	return map[string]any{"Fn::GetAtt": []any{id, attr}}
}

// jsonEqual compares two values by their JSON encoding.
func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

func sortedStrings(v any) []string {
	var out []string
	for _, x := range asList(v) {
		out = append(out, fmt.Sprint(x))
	}
	sort.Strings(out)
	return out
}

// statements walks every policy document in the template (role policies,
// managed and inline, assume-role documents, queue policies, ...): any map
// with a "Statement" key inside a "PolicyDocument"-like property.
func statements(v any, visit func(path string, st map[string]any)) {
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if sts, ok := x["Statement"]; ok {
				for i, st := range asList(sts) {
					if m, ok := st.(map[string]any); ok {
						visit(fmt.Sprintf("%s.Statement[%d]", path, i), m)
					}
				}
			}
			for k, child := range x {
				walk(path+"."+k, child)
			}
		case []any:
			for i, child := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), child)
			}
		}
	}
	walk("", v)
}

// firstLine is the first line of an annotation's data (nag messages carry
// a long explanation after it).
func firstLine(v any) string {
	s, _ := v.(string)
	if p, ok := v.(*string); ok && p != nil {
		s = *p
	}
	line, _, _ := strings.Cut(s, "\n")
	return line
}
