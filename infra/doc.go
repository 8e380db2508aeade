// Command infra is localeflow's CDK app: `go run .` (or `cdk synth`) writes
// the CloudFormation template of the whole deployment to cdk.out/.
//
// The app only reads the CDK context into props and puts the localeflow
// construct (package localeflow, which a team can also import into its own
// stack) into the stack it deploys; the construct builds every resource
// from the shared definition in package topology (the same one the
// local-stack bootstrap reads), so names, keys, indexes, queues, rules,
// schedules and functions cannot drift between AWS, LocalStack and the
// Docker-free local stack.
//
// The app is a separate Go module (github.com/localeflow/localeflow/infra) so
// that CDK's large dependency tree stays out of the Lambda module, and the
// pinned npm CLI lives in cli/ (ignored by this module's go.mod) so that
// `go vet ./...` never walks node_modules. See README.md for deploying.
package main
