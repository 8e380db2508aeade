package localeflow

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// TestNagAwsSolutions runs the cdk-nag AwsSolutions pack over the stack and
// fails on any finding (error or warning) that the stack does not suppress
// with a reason in nag.go.
func TestNagAwsSolutions(t *testing.T) {
	for name, props := range map[string]*Props{
		"default": testProps(),
		"dev stack with reservations and alarm topic": func() *Props {
			p := testProps()
			p.DeletionProtection = jsii.Bool(false)
			p.AlarmTopicArn = "arn:aws:sns:us-east-1:123456789012:ops"
			p.Functions = map[string]FunctionOptions{"poller": {ReservedConcurrency: 2}}
			return p
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			app := awscdk.NewApp(nil)
			lf, err := NewStack(app, "Nag", &StackProps{Props: *props})
			if err != nil {
				t.Fatal(err)
			}
			stack := lf.Stack()
			awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
			var annotations assertions.Annotations
			noPanic(t, func() { annotations = assertions.Annotations_FromStack(stack) })
			nagID := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
			for kind, found := range map[string]*[]*cxapi.SynthesisMessage{
				"error":   annotations.FindError(jsii.String("*"), nagID),
				"warning": annotations.FindWarning(jsii.String("*"), nagID),
			} {
				for _, m := range *found {
					t.Errorf("cdk-nag %s at %s: %v", kind, *m.Id, firstLine(m.Entry.Data))
				}
			}
		})
	}
}

// TestNagSuppressionsAreJustified keeps every suppression tied to a written
// reason of substance.
func TestNagSuppressionsAreJustified(t *testing.T) {
	for _, reason := range []string{reasonSQSTLS, reasonSecretRotation} {
		if len(reason) < 80 {
			t.Errorf("suppression reason too thin: %q", reason)
		}
	}
}
