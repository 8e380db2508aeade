package awsclient

import (
	"context"
	"encoding/json"
	"os"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// EnvCallLog names the file Record appends every AWS call to. Set by the
// integration tests (`make test`) for the IAM sufficiency check
// (infra/localeflow TestEveryRecordedCallIsAllowed); unset everywhere else,
// where Record changes nothing.
const EnvCallLog = "LOCALEFLOW_AWS_CALL_LOG"

// Call is one line of the call log: who called (a function's directory
// name, or "localeflow <command>"), the SDK's service id and operation, and
// the request's parameters reduced to what authorizes it (resource names,
// key attribute names, expressions, Select, ReturnValues, event sources and
// detail-types): never an item, a message body, an attribute value or a
// secret.
type Call struct {
	Principal string         `json:"principal"`
	Service   string         `json:"service"`
	Operation string         `json:"operation"`
	Params    map[string]any `json:"params,omitempty"`
}

// Record returns cfg with a middleware that appends each call made through
// a client of cfg to the file EnvCallLog names (one JSON Call a line), as
// principal. Without EnvCallLog it returns cfg unchanged.
func Record(cfg aws.Config, principal string) aws.Config {
	name := os.Getenv(EnvCallLog)
	if name == "" {
		return cfg
	}
	r := &recorder{file: name, principal: principal}
	cfg.APIOptions = append(append([]func(*middleware.Stack) error(nil), cfg.APIOptions...), func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("localeflowRecordCall", r.record), middleware.After)
	})
	return cfg
}

type recorder struct {
	file, principal string
}

var recordMu sync.Mutex

func (r *recorder) record(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	c := Call{Principal: r.principal, Service: awsmiddleware.GetServiceID(ctx), Operation: awsmiddleware.GetOperationName(ctx)}
	if b, err := json.Marshal(in.Parameters); err == nil {
		var raw map[string]any
		if json.Unmarshal(b, &raw) == nil {
			c.Params, _ = authorizing(raw).(map[string]any)
		}
	}
	if line, err := json.Marshal(c); err == nil {
		recordMu.Lock()
		// One write per line on an O_APPEND file: the processes of one test
		// run (functions under the emulator, the CLI) share the file.
		if f, err := os.OpenFile(r.file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			_, _ = f.Write(append(line, '\n'))
			_ = f.Close()
		}
		recordMu.Unlock()
	}
	return next.HandleInitialize(ctx, in)
}

// keptParams are the parameters (at any depth) that decide which action on
// which resource a request is, with which condition keys.
var keptParams = map[string]bool{
	// DynamoDB
	"TableName": true, "IndexName": true, "RequestItems": true, "TransactItems": true,
	"Get": true, "Put": true, "Update": true, "Delete": true, "ConditionCheck": true,
	"ProjectionExpression": true, "ExpressionAttributeNames": true, "UpdateExpression": true,
	"ConditionExpression": true, "KeyConditionExpression": true, "FilterExpression": true,
	"AttributesToGet": true, "Select": true, "ReturnValues": true,
	// SQS
	"QueueUrl": true, "QueueName": true,
	// EventBridge
	"EventBusName": true, "Name": true, "ArchiveName": true, "EventSourceArn": true, "ReplayName": true,
	"Destination": true, "Arn": true, "Entries": true, "Source": true, "DetailType": true, "Resources": true,
	// Secrets Manager, Lambda
	"SecretId": true, "FunctionName": true,
}

// keyParams hold attribute values keyed by attribute name: only the names
// are kept.
var keyParams = map[string]bool{"Key": true, "Keys": true, "Item": true}

func authorizing(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range t {
			switch {
			case keyParams[k]:
				out[k] = attributeNames(val)
			case k == "ExpressionAttributeNames":
				// Placeholder → attribute name: names only, no values.
				out[k] = val
			case k == "RequestItems":
				// Table name → its keys and projection.
				tables := map[string]any{}
				if m, ok := val.(map[string]any); ok {
					for table, spec := range m {
						tables[table] = authorizing(spec)
					}
				}
				out[k] = tables
			case keptParams[k]:
				out[k] = authorizing(val)
			}
		}
		return out
	case []any:
		out := make([]any, 0, len(t))
		for _, e := range t {
			out = append(out, authorizing(e))
		}
		return out
	default:
		return v
	}
}

// attributeNames is the sorted attribute names of an item or key (or of
// each of a list of keys, merged).
func attributeNames(v any) []string {
	set := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k := range t {
				set[k] = true
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
