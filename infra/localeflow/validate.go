package localeflow

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/contract"
)

// envPrefix starts every variable the functions read.
const envPrefix = "LOCALEFLOW_"

// envCheck validates, at synth (Node().AddValidation), a function's final
// environment: what the construct set plus whatever the app added after
// New through an escape hatch (Function.AddEnvironment, the L1
// CfnFunction's SetEnvironment). Raw template overrides
// (AddPropertyOverride) are not visible to a validation and are not
// checked.
type envCheck struct {
	fn  awslambda.Function
	dir string
	cfg stackConfig
	// set is the environment the construct gave the function.
	set map[string]*string
}

// Validate is constructs.IValidation.
func (c *envCheck) Validate() *[]*string {
	errs := c.check()
	out := make([]*string, 0, len(errs))
	for _, e := range errs {
		out = append(out, jsii.String(e))
	}
	return &out
}

// check returns one message per problem: a stack-owned variable changed
// or added, a variable the function does not read, a value only known at
// deploy, and the function's own config loader refusing the result (a
// function that would not start, e.g. the coordinator without receipt
// issuers).
func (c *envCheck) check() []string {
	stack := awscdk.Stack_Of(c.fn)
	final := finalEnvironment(stack, c.fn)
	set, _ := stack.Resolve(c.set).(map[string]any)
	base := baseEnv(c.cfg)
	reads := contract.Names(contract.FunctionEnv[c.dir], contract.Operator)
	where := c.dir + " environment:"
	env := map[string]string{}
	var errs []string
	for _, name := range slices.Sorted(maps.Keys(final)) {
		if !strings.HasPrefix(name, envPrefix) {
			continue
		}
		value := final[name]
		literal, isLiteral := value.(string)
		if want, ok := set[name]; ok {
			if !sameValue(want, value) {
				errs = append(errs, fmt.Sprintf("infra: %s %s was changed after New: the construct sets it (%v), an escape hatch made it %v; %s",
					where, name, render(want), render(value), ownerOf(name)))
				continue
			}
			if isLiteral {
				env[name] = literal
			} else {
				env[name] = base[name]
			}
			continue
		}
		if err := refuseSetting(where, name); err != nil {
			errs = append(errs, err.Error()+" (added after New)")
			continue
		}
		if !slices.Contains(reads, name) {
			errs = append(errs, fmt.Sprintf("infra: %s %s is not a setting the %s reads (%s)", where, name, c.dir, strings.Join(reads, ", ")))
			continue
		}
		if !isLiteral {
			errs = append(errs, fmt.Sprintf("infra: %s %s is %v, known only at deploy: its config loader cannot check it at synth (give the value itself)",
				where, name, render(value)))
			continue
		}
		env[name] = literal
	}
	if len(errs) > 0 {
		return errs
	}
	if c.cfg.synthOnly && c.cfg.receiptIssuers == (ReceiptIssuers{}) && c.dir == contract.FunctionCoordinator {
		p := placeholderIssuers()
		for name, v := range map[string]string{contract.EnvReceiptIssuersQuality: p.Quality,
			contract.EnvReceiptIssuersHumanReview: p.HumanReview, contract.EnvReceiptIssuersIndependentReview: p.IndependentReview} {
			if _, ok := env[name]; !ok {
				env[name] = v
			}
		}
	}
	if _, err := loadConfig(c.dir, env); err != nil {
		return []string{fmt.Sprintf("infra: %s the function would not start: its config loader refuses its final environment: %v%s",
			where, err, issuersHint(c.dir, env))}
	}
	return nil
}

// issuersHint names the prop when the coordinator lacks receipt issuers.
func issuersHint(dir string, env map[string]string) string {
	if dir != contract.FunctionCoordinator {
		return ""
	}
	for _, name := range []string{contract.EnvReceiptIssuersQuality, contract.EnvReceiptIssuersHumanReview, contract.EnvReceiptIssuersIndependentReview} {
		if env[name] == "" {
			return " (set Props.ReceiptIssuers, all three kinds: make RECEIPT_ISSUERS_QUALITY, RECEIPT_ISSUERS_HUMAN_REVIEW, " +
				"RECEIPT_ISSUERS_INDEPENDENT_REVIEW; a template only to read: Props.SynthOnly)"
		}
	}
	return ""
}

// ownerOf says which prop sets a stack-owned variable.
func ownerOf(name string) string {
	if err := refuseSetting("variable", name); err != nil {
		return strings.TrimPrefix(err.Error(), "infra: ")
	}
	return "set it through Props.Settings or Props.SettingsEnv"
}

// finalEnvironment is the function's environment variables as the
// template will have them, tokens resolved to their CloudFormation form
// ({"Ref": ...}).
func finalEnvironment(stack awscdk.Stack, fn awslambda.Function) map[string]any {
	cfn := fn.Node().DefaultChild().(awslambda.CfnFunction)
	props, _ := stack.Resolve(cfn.CfnProperties()).(map[string]any)
	env, _ := props["environment"].(map[string]any)
	vars, _ := env["variables"].(map[string]any)
	return vars
}

func sameValue(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

func render(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
