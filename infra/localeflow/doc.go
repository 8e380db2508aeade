// Package localeflow is localeflow's CDK construct: New builds the whole
// deployment (tables, queues, event bus, functions, key secrets, data key,
// alarms, dashboard) inside any construct, typically a team's own stack,
// and returns the resources; NewStack is the stack the infra app deploys.
//
// Every resource comes from the shared definition in package topology (the
// same one the local-stack bootstrap reads), so names, keys, indexes,
// queues, rules, schedules and functions cannot drift between AWS,
// LocalStack and the Docker-free local stack.
package localeflow
