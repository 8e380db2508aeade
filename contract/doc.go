// Package contract is localeflow's wire contract in one place: what other
// systems and the deployment see of the functions.
//
//   - the EventBridge source and every detail-type, input and output, and
//     the detail structs of the events the functions publish (events.go);
//   - the delayed-message body the functions put on their own queues
//     (delayed.go);
//   - the environment variable names, with one declared list per function
//     of the variables it reads (env.go): the functions' config loaders
//     read through these names, the CDK stack and the local tools set them,
//     and tests check that both sides agree;
//   - the custom metric namespace, dimensions and names (metrics.go);
//   - the payloads of the input events (inputs.go), and the HTTP bodies
//     and signed artifacts localeflow sends its peers: the approval
//     payload (approval.go), the delivery request and bundle
//     (delivery.go), the evidence request and the receipt payload
//     (evidence.go). Their builders and verifiers are in core/release
//     (the product's side) and peer (a peer's side).
//
// It is pure data and imports only the standard library, so every layer
// (core, adapters, functions, infra, the local tools) may import it
// (dev/archtest keeps it so).
// Resource topology (tables, queues, rules, schedules) stays in topology/.
package contract
