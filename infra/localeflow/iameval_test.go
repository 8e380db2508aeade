package localeflow_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/localeflow/localeflow/topology"
)

// This file is a small IAM evaluator for the IAM sufficiency check
// (TestEveryRecordedCallIsAllowed): the synthesized policies of one
// principal, resolved against the template's logical ids, decide whether
// each recorded AWS call (adapters/awsclient.Record) is allowed: an Allow
// statement whose Action, Resource (wildcards * and ?) and Condition
// (the string and set operators the templates use) all match, and no Deny.

// Placeholders of the pseudo parameters (any fixed values do: the
// recorded calls are translated to the same ones).
const (
	evalPartition = "aws"
	evalRegion    = "us-east-1"
	evalAccount   = "123456789012"
)

// recordedCall is one line of the call log (awsclient.Call).
type recordedCall struct {
	Principal string         `json:"principal"`
	Service   string         `json:"service"`
	Operation string         `json:"operation"`
	Params    map[string]any `json:"params"`
}

// iamRequest is one authorization IAM makes for a call: a call may need
// several (BatchGetItem per table, TransactWriteItems per item, PutEvents
// per entry).
type iamRequest struct {
	action   string
	resource string
	context  map[string][]string
}

func (r iamRequest) String() string {
	keys := make([]string, 0, len(r.context))
	for k := range r.context {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ctx []string
	for _, k := range keys {
		ctx = append(ctx, k+"="+strings.Join(r.context[k], ","))
	}
	s := r.action + " on " + r.resource
	if len(ctx) > 0 {
		s += " [" + strings.Join(ctx, " ") + "]"
	}
	return s
}

// statement is one resolved policy statement.
type statement struct {
	sid        string
	effect     string
	actions    []string
	resources  []string
	conditions map[string]map[string][]string
}

// template is a synthesized template with its resolver.
type template struct {
	resources map[string]map[string]any
}

func newTemplate(raw map[string]any) *template {
	t := &template{resources: map[string]map[string]any{}}
	for id, r := range raw["Resources"].(map[string]any) {
		t.resources[id] = r.(map[string]any)
	}
	return t
}

func (t *template) props(id string) map[string]any {
	p, _ := t.resources[id]["Properties"].(map[string]any)
	return p
}

func (t *template) typeOf(id string) string {
	s, _ := t.resources[id]["Type"].(string)
	return s
}

// resolve evaluates an intrinsic to a string: Ref, Fn::GetAtt (Arn),
// Fn::Join, Fn::Sub and the pseudo parameters.
func (t *template) resolve(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool, float64:
		return fmt.Sprint(x), nil
	case map[string]any:
		if len(x) != 1 {
			return "", fmt.Errorf("not an intrinsic: %v", x)
		}
		for fn, arg := range x {
			switch fn {
			case "Ref":
				return t.ref(arg.(string))
			case "Fn::GetAtt":
				a := arg.([]any)
				return t.getAtt(a[0].(string), a[1].(string))
			case "Fn::Join":
				a := arg.([]any)
				var parts []string
				for _, p := range a[1].([]any) {
					s, err := t.resolve(p)
					if err != nil {
						return "", err
					}
					parts = append(parts, s)
				}
				return strings.Join(parts, a[0].(string)), nil
			case "Fn::Sub":
				s, ok := arg.(string)
				if !ok {
					return "", fmt.Errorf("Fn::Sub with variables is not supported")
				}
				var err error
				out := regexp.MustCompile(`\$\{([^}]+)\}`).ReplaceAllStringFunc(s, func(m string) string {
					name := m[2 : len(m)-1]
					var r string
					var e error
					if id, attr, ok := strings.Cut(name, "."); ok {
						r, e = t.getAtt(id, attr)
					} else {
						r, e = t.ref(name)
					}
					if e != nil {
						err = e
					}
					return r
				})
				return out, err
			}
			return "", fmt.Errorf("intrinsic %s is not supported", fn)
		}
	}
	return "", fmt.Errorf("cannot resolve %v", v)
}

func (t *template) ref(name string) (string, error) {
	switch name {
	case "AWS::Partition":
		return evalPartition, nil
	case "AWS::Region":
		return evalRegion, nil
	case "AWS::AccountId":
		return evalAccount, nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	}
	if _, ok := t.resources[name]; !ok {
		return "", fmt.Errorf("Ref of unknown %s", name)
	}
	switch t.typeOf(name) {
	case "AWS::SecretsManager::Secret":
		return t.getAtt(name, "Arn")
	case "AWS::KMS::Key":
		return "key-" + name, nil
	}
	return t.name(name)
}

// name is a resource's physical name: its name property, else its id.
func (t *template) name(id string) (string, error) {
	for _, p := range []string{"TableName", "QueueName", "Name", "ArchiveName", "FunctionName", "RoleName", "TopicName", "LogGroupName"} {
		if v, ok := t.props(id)[p]; ok {
			return t.resolve(v)
		}
	}
	return id, nil
}

func (t *template) getAtt(id, attr string) (string, error) {
	if _, ok := t.resources[id]; !ok {
		return "", fmt.Errorf("GetAtt of unknown %s", id)
	}
	if attr != "Arn" {
		return "", fmt.Errorf("GetAtt %s.%s is not supported", id, attr)
	}
	name, err := t.name(id)
	if err != nil {
		return "", err
	}
	arn := func(service, res string) string {
		return "arn:" + evalPartition + ":" + service + ":" + evalRegion + ":" + evalAccount + ":" + res
	}
	switch t.typeOf(id) {
	case "AWS::DynamoDB::Table":
		return arn("dynamodb", "table/"+name), nil
	case "AWS::SQS::Queue":
		return arn("sqs", name), nil
	case "AWS::Events::EventBus":
		return arn("events", "event-bus/"+name), nil
	case "AWS::Events::Archive":
		return arn("events", "archive/"+name), nil
	case "AWS::Lambda::Function":
		return arn("lambda", "function:"+name), nil
	case "AWS::SecretsManager::Secret":
		// The random suffix AWS appends to a secret's ARN.
		return arn("secretsmanager", "secret:"+name+"-AbCdEf"), nil
	case "AWS::KMS::Key":
		return arn("kms", "key/"+id), nil
	case "AWS::Logs::LogGroup":
		return arn("logs", "log-group:"+name+":*"), nil
	case "AWS::SNS::Topic":
		return arn("sns", name), nil
	case "AWS::IAM::Role":
		return "arn:" + evalPartition + ":iam::" + evalAccount + ":role/" + name, nil
	}
	return "", fmt.Errorf("GetAtt %s.Arn of type %s is not supported", id, t.typeOf(id))
}

// roleStatements are the statements of every AWS::IAM::Policy attached to
// role id and of its inline policies.
func (t *template) roleStatements(role string) ([]statement, error) {
	var docs []any
	for id, r := range t.resources {
		if r["Type"] != "AWS::IAM::Policy" {
			continue
		}
		for _, ref := range t.props(id)["Roles"].([]any) {
			if m, ok := ref.(map[string]any); ok && m["Ref"] == role {
				docs = append(docs, t.props(id)["PolicyDocument"])
			}
		}
	}
	if inline, ok := t.props(role)["Policies"].([]any); ok {
		for _, p := range inline {
			docs = append(docs, p.(map[string]any)["PolicyDocument"])
		}
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("no policy on role %s", role)
	}
	var out []statement
	for _, d := range docs {
		for _, s := range asList(d.(map[string]any)["Statement"]) {
			st, err := t.statement(s.(map[string]any))
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
	}
	return out, nil
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

func (t *template) statement(s map[string]any) (statement, error) {
	for _, k := range []string{"NotAction", "NotResource", "NotPrincipal"} {
		if _, ok := s[k]; ok {
			return statement{}, fmt.Errorf("%s is not supported by the evaluator", k)
		}
	}
	st := statement{effect: s["Effect"].(string), conditions: map[string]map[string][]string{}}
	st.sid, _ = s["Sid"].(string)
	for _, a := range asList(s["Action"]) {
		st.actions = append(st.actions, a.(string))
	}
	for _, r := range asList(s["Resource"]) {
		v, err := t.resolve(r)
		if err != nil {
			return statement{}, err
		}
		st.resources = append(st.resources, v)
	}
	if c, ok := s["Condition"].(map[string]any); ok {
		for op, keys := range c {
			st.conditions[op] = map[string][]string{}
			for k, vals := range keys.(map[string]any) {
				for _, v := range asList(vals) {
					r, err := t.resolve(v)
					if err != nil {
						return statement{}, err
					}
					st.conditions[op][k] = append(st.conditions[op][k], r)
				}
			}
		}
	}
	return st, nil
}

// wildcard matches s against an IAM pattern (* any run, ? one character);
// caseFold for actions.
func wildcard(pattern, s string, caseFold bool) bool {
	if caseFold {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	var b strings.Builder
	b.WriteString("^")
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String()).MatchString(s)
}

func anyMatch(patterns []string, s string, caseFold bool) bool {
	for _, p := range patterns {
		if wildcard(p, s, caseFold) {
			return true
		}
	}
	return false
}

// conditionsHold evaluates every operator of st for req (all must hold);
// an operator the evaluator does not know fails closed.
func (st statement) conditionsHold(req iamRequest) (bool, error) {
	for op, keys := range st.conditions {
		for key, want := range keys {
			got, present := req.context[key]
			var ok bool
			switch op {
			case "StringEquals", "Bool":
				ok = present && len(got) == 1 && equalsAny(want, got[0])
			case "StringLike":
				ok = present && len(got) == 1 && anyMatch(want, got[0], false)
			case "StringEqualsIfExists":
				ok = !present || (len(got) == 1 && equalsAny(want, got[0]))
			case "ForAllValues:StringEquals":
				ok = true
				for _, g := range got {
					ok = ok && equalsAny(want, g)
				}
			case "ForAnyValue:StringEquals":
				for _, g := range got {
					ok = ok || equalsAny(want, g)
				}
			default:
				return false, fmt.Errorf("condition operator %s is not supported by the evaluator", op)
			}
			if !ok {
				return false, nil
			}
		}
	}
	return true, nil
}

// equalsAny: s is one of vals (StringEquals compares exactly).
func equalsAny(vals []string, s string) bool {
	for _, v := range vals {
		if v == s {
			return true
		}
	}
	return false
}

// allowed reports whether statements allow req, and which statement did.
func allowed(stmts []statement, req iamRequest) (bool, string, error) {
	allow := ""
	for _, st := range stmts {
		if !anyMatch(st.actions, req.action, true) || !anyMatch(st.resources, req.resource, false) {
			continue
		}
		ok, err := st.conditionsHold(req)
		if err != nil {
			return false, "", err
		}
		if !ok {
			continue
		}
		if st.effect == "Deny" {
			return false, "", nil
		}
		allow = st.sid
		if allow == "" {
			allow = "(no sid)"
		}
	}
	return allow != "", allow, nil
}

// names maps a recorded resource name (any prefix: the tests make their
// own) to the template's: by the topology's name suffixes, longest first;
// the bus to the template's bus (its own or the host's).
type names struct {
	prefix  string
	bus     string
	suffixs []string
}

func newNames(tpl *template, prefix string) (names, error) {
	n := names{prefix: prefix}
	topo := topology.New("x")
	all := []string{topo.Monitor.Name, topo.Release.Name, topo.Archive.Name, topo.BusName, topo.Quarantine.Name, topo.EventDLQ.Name}
	for _, q := range topo.Queues() {
		all = append(all, q.Name, q.DLQName)
	}
	for _, r := range topo.Rules {
		all = append(all, r.Name)
	}
	for _, f := range topo.Functions {
		all = append(all, f.Name)
	}
	for _, s := range topology.Secrets {
		all = append(all, topo.SecretName(s))
		if s.PublicStem != "" {
			all = append(all, topo.PublicKeySecretName(s))
		}
	}
	for _, a := range all {
		n.suffixs = append(n.suffixs, strings.TrimPrefix(a, "x"))
	}
	sort.Slice(n.suffixs, func(i, j int) bool { return len(n.suffixs[i]) > len(n.suffixs[j]) })
	// The bus the input rules are on.
	for id := range tpl.resources {
		if tpl.typeOf(id) == "AWS::Events::Rule" {
			if b, ok := tpl.props(id)["EventBusName"]; ok {
				s, err := tpl.resolve(b)
				if err != nil {
					return n, err
				}
				n.bus = s
			}
		}
	}
	if n.bus == "" {
		return n, fmt.Errorf("no rule names its bus")
	}
	return n, nil
}

// of translates a recorded name.
func (n names) of(recorded string) (string, error) {
	if strings.HasSuffix(recorded, "-bus") {
		return n.bus, nil
	}
	for _, s := range n.suffixs {
		if strings.HasSuffix(recorded, s) && len(recorded) > len(s) {
			return n.prefix + s, nil
		}
	}
	return "", fmt.Errorf("%q: %w", recorded, errForeign)
}

// errForeign: a call on a resource that is no deployment's (a test's own
// table, e.g. a renamed or deliberately altered one); such calls are
// counted, not checked.
var errForeign = errors.New("no resource name of a deployment")

func arnOf(service, res string) string {
	return "arn:" + evalPartition + ":" + service + ":" + evalRegion + ":" + evalAccount + ":" + res
}

// serviceActions is each SDK service id's IAM prefix.
var serviceActions = map[string]string{
	"DynamoDB": "dynamodb", "SQS": "sqs", "EventBridge": "events", "Secrets Manager": "secretsmanager",
	"Lambda": "lambda", "KMS": "kms", "STS": "sts",
}

// noPermission are the calls IAM does not authorize.
var noPermission = map[string]string{
	"STS.GetCallerIdentity": "no permission is required to call GetCallerIdentity (IAM User Guide)",
}

// requestsOf is the IAM authorizations one recorded call needs.
func requestsOf(c recordedCall, n names) ([]iamRequest, error) {
	if _, ok := noPermission[c.Service+"."+c.Operation]; ok {
		return nil, nil
	}
	prefix, ok := serviceActions[c.Service]
	if !ok {
		return nil, fmt.Errorf("no IAM mapping for service %q: add it to serviceActions", c.Service)
	}
	p := c.Params
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	action := prefix + ":" + c.Operation
	switch c.Service {
	case "DynamoDB":
		table := func(name, index string) (string, error) {
			t, err := n.of(name)
			if err != nil {
				return "", err
			}
			r := arnOf("dynamodb", "table/"+t)
			if index != "" {
				r += "/index/" + index
			}
			return r, nil
		}
		switch c.Operation {
		case "BatchGetItem", "BatchWriteItem":
			var out []iamRequest
			items, _ := p["RequestItems"].(map[string]any)
			for name, spec := range items {
				r, err := table(name, "")
				if err != nil {
					return nil, err
				}
				out = append(out, iamRequest{action, r, dynamoContext(spec.(map[string]any))})
			}
			return out, nil
		case "TransactWriteItems", "TransactGetItems":
			var out []iamRequest
			for _, it := range asList(p["TransactItems"]) {
				for kind, spec := range it.(map[string]any) {
					if spec == nil {
						continue // the other members of the union
					}
					a := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}[kind]
					m := spec.(map[string]any)
					r, err := table(str(m, "TableName"), "")
					if err != nil || a == "" {
						return nil, fmt.Errorf("transact item %s: %v", kind, err)
					}
					out = append(out, iamRequest{"dynamodb:" + a, r, dynamoContext(m)})
				}
			}
			return out, nil
		}
		r, err := table(str(p, "TableName"), str(p, "IndexName"))
		if err != nil {
			return nil, err
		}
		return []iamRequest{{action, r, dynamoContext(p)}}, nil
	case "SQS":
		name := str(p, "QueueName")
		if u := str(p, "QueueUrl"); u != "" {
			parsed, err := url.Parse(u)
			if err != nil {
				return nil, err
			}
			name = path.Base(parsed.Path)
		}
		q, err := n.of(name)
		if err != nil {
			return nil, err
		}
		// The batch operations are authorized as their single ones.
		if single, ok := strings.CutSuffix(c.Operation, "Batch"); ok {
			action = prefix + ":" + single
		}
		return []iamRequest{{action, arnOf("sqs", q), nil}}, nil
	case "EventBridge":
		bus := func(v string) (string, error) {
			if v == "" || v == "default" {
				return "default", nil
			}
			if strings.HasPrefix(v, "arn:") {
				v = v[strings.LastIndex(v, "/")+1:]
			}
			return n.of(v)
		}
		switch c.Operation {
		case "PutEvents":
			var out []iamRequest
			for _, e := range asList(p["Entries"]) {
				m := e.(map[string]any)
				b, err := bus(str(m, "EventBusName"))
				if err != nil {
					return nil, err
				}
				out = append(out, iamRequest{action, arnOf("events", "event-bus/"+b),
					map[string][]string{"events:source": {str(m, "Source")}, "events:detail-type": {str(m, "DetailType")}}})
			}
			return out, nil
		case "DescribeEventBus":
			b, err := bus(str(p, "Name"))
			if err != nil {
				return nil, err
			}
			return []iamRequest{{action, arnOf("events", "event-bus/"+b), nil}}, nil
		case "DescribeArchive":
			a, err := n.of(str(p, "ArchiveName"))
			if err != nil {
				return nil, err
			}
			return []iamRequest{{action, arnOf("events", "archive/"+a), nil}}, nil
		case "DescribeRule":
			b, err := bus(str(p, "EventBusName"))
			if err != nil {
				return nil, err
			}
			r, err := n.of(str(p, "Name"))
			if err != nil {
				return nil, err
			}
			res := "rule/" + r
			if b != "default" {
				res = "rule/" + b + "/" + r
			}
			return []iamRequest{{action, arnOf("events", res), nil}}, nil
		case "StartReplay":
			src := str(p, "EventSourceArn")
			a, err := n.of(src[strings.LastIndex(src, "/")+1:])
			if err != nil {
				return nil, err
			}
			return []iamRequest{{action, arnOf("events", "archive/"+a), nil}}, nil
		case "DescribeReplay", "CancelReplay":
			return []iamRequest{{action, arnOf("events", "replay/"+str(p, "ReplayName")), nil}}, nil
		}
	case "Secrets Manager":
		id := str(p, "SecretId")
		if strings.HasPrefix(id, "arn:") {
			// arn:…:secret:<name>-<6 random characters>
			id = id[strings.Index(id, ":secret:")+len(":secret:"):]
			id = id[:strings.LastIndex(id, "-")]
		}
		s, err := n.of(id)
		if err != nil {
			return nil, err
		}
		return []iamRequest{{action, arnOf("secretsmanager", "secret:"+s+"-AbCdEf"), nil}}, nil
	case "Lambda":
		f, err := n.of(str(p, "FunctionName"))
		if err != nil {
			return nil, err
		}
		return []iamRequest{{action, arnOf("lambda", "function:"+f), nil}}, nil
	}
	return nil, fmt.Errorf("no IAM mapping for %s.%s: add it to requestsOf", c.Service, c.Operation)
}

// dynamoContext is the DynamoDB condition keys of a request:
// dynamodb:Attributes (the key and item attribute names, AttributesToGet,
// and every name the expressions use), dynamodb:Select,
// dynamodb:ReturnValues.
func dynamoContext(p map[string]any) map[string][]string {
	ctx := map[string][]string{}
	set := map[string]bool{}
	for _, k := range []string{"Key", "Keys", "Item", "AttributesToGet"} {
		for _, v := range asList(p[k]) {
			if s, ok := v.(string); ok {
				set[s] = true
			}
		}
	}
	names, _ := p["ExpressionAttributeNames"].(map[string]any)
	for _, k := range []string{"ProjectionExpression", "UpdateExpression", "ConditionExpression", "KeyConditionExpression", "FilterExpression"} {
		s, _ := p[k].(string)
		for _, a := range expressionAttributes(s, names) {
			set[a] = true
		}
	}
	for a := range set {
		ctx["dynamodb:Attributes"] = append(ctx["dynamodb:Attributes"], a)
	}
	sort.Strings(ctx["dynamodb:Attributes"])
	if len(set) == 0 {
		delete(ctx, "dynamodb:Attributes")
	}
	for _, k := range []string{"Select", "ReturnValues"} {
		if s, ok := p[k].(string); ok && s != "" {
			ctx["dynamodb:"+k] = []string{s}
		}
	}
	return ctx
}

// expressionWords are the keywords and functions of DynamoDB expressions.
var expressionWords = map[string]bool{
	"and": true, "or": true, "not": true, "between": true, "in": true, "set": true, "remove": true, "add": true, "delete": true,
	"attribute_exists": true, "attribute_not_exists": true, "attribute_type": true, "begins_with": true, "contains": true,
	"size": true, "if_not_exists": true, "list_append": true,
}

var expressionToken = regexp.MustCompile(`[#:]?[A-Za-z_][A-Za-z0-9_]*`)

// expressionAttributes are the top-level attribute names an expression
// uses (#name placeholders resolved, :values and keywords skipped, a path
// a.b[0] counted as a).
func expressionAttributes(expr string, names map[string]any) []string {
	var out []string
	for _, loc := range expressionToken.FindAllStringIndex(expr, -1) {
		tok := expr[loc[0]:loc[1]]
		if loc[0] > 0 && (expr[loc[0]-1] == '.') {
			continue // a nested path element
		}
		switch {
		case strings.HasPrefix(tok, ":"):
		case strings.HasPrefix(tok, "#"):
			if v, ok := names[tok].(string); ok {
				out = append(out, v)
			}
		case expressionWords[strings.ToLower(tok)]:
		default:
			out = append(out, tok)
		}
	}
	return out
}

func decodeCalls(data []byte) ([]recordedCall, error) {
	var out []recordedCall
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var c recordedCall
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		out = append(out, c)
	}
	return out, nil
}
