package bootstraps

import (
	"os/exec"
	"strings"
	"testing"
)

// heavy are packages a bootstrap must not link:
//   - html/template and text/template look methods up by name through
//     reflection, so the linker keeps every exported method of every
//     reachable type (each SDK client's whole API): +4.9 MB on health;
//   - the SDK's default config loader links the STS, SSO, SSO-OIDC,
//     sign-in and instance-metadata clients for credential sources a Lambda
//     function never uses: about 1.3 MB per bootstrap.
var heavy = []string{
	"html/template",
	"text/template",
	"github.com/aws/aws-sdk-go-v2/config",
	"github.com/aws/aws-sdk-go-v2/service/sts",
	"github.com/aws/aws-sdk-go-v2/service/sso",
	"github.com/aws/aws-sdk-go-v2/service/ssooidc",
	"github.com/aws/aws-sdk-go-v2/service/signin",
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds",
}

var functions = []string{"poller", "coordinator", "health"}

// TestBootstrapsDoNotLinkHeavyPackages lists each function's dependencies
// as they are built for Lambda (linux/arm64, lambda.norpc).
func TestBootstrapsDoNotLinkHeavyPackages(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not found")
	}
	for _, fn := range functions {
		t.Run(fn, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-tags", "lambda.norpc", "-deps", "github.com/localeflow/localeflow/functions/"+fn)
			cmd.Env = append(cmd.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list: %v", err)
			}
			deps := map[string]bool{}
			for _, p := range strings.Fields(string(out)) {
				deps[p] = true
			}
			if !deps["github.com/localeflow/localeflow/functions/"+fn] || !deps["github.com/aws/aws-sdk-go-v2/service/dynamodb"] {
				t.Fatalf("go list did not list the function's dependencies:\n%s", out)
			}
			for _, p := range heavy {
				if deps[p] {
					t.Errorf("functions/%s links %s", fn, p)
				}
			}
		})
	}
}
