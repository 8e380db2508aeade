package dynamofake

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The expression language, as far as localeflow's adapters write it
// (through feature/dynamodb/expression): conditions with AND, OR, NOT,
// parentheses, = <> < <= > >=, BETWEEN, IN, attribute_exists,
// attribute_not_exists, begins_with; updates with SET (a value, a path,
// path + value, path - value, if_not_exists) and REMOVE; projections of
// top-level names. Anything else is a ValidationException, so a request the
// fake does not understand is never answered silently.

type token struct {
	kind string // "name" (#x or identifier), "value" (:x), "op", "word", "num"
	text string
}

func tokenize(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			i++
		case c == '(' || c == ')' || c == ',' || c == '+' || c == '-' || c == '=':
			out = append(out, token{"op", string(c)})
			i++
		case c == '<' || c == '>':
			if i+1 < len(s) && (s[i+1] == '=' || (c == '<' && s[i+1] == '>')) {
				out = append(out, token{"op", s[i : i+2]})
				i += 2
			} else {
				out = append(out, token{"op", string(c)})
				i++
			}
		case c == '#' || c == ':' || isIdent(c):
			j := i + 1
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			switch c {
			case '#':
				out = append(out, token{"name", s[i:j]})
			case ':':
				out = append(out, token{"value", s[i:j]})
			default:
				out = append(out, token{"word", s[i:j]})
			}
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q in expression", c)
		}
	}
	return out, nil
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// parser reads tokens with the request's name and value maps.
type parser struct {
	toks   []token
	pos    int
	names  map[string]string
	values map[string]types.AttributeValue
	// used records which placeholders were referenced (DynamoDB refuses
	// unused ones).
	usedNames, usedValues map[string]bool
}

func newParser(expr string, names map[string]string, values map[string]types.AttributeValue, used *usage) (*parser, error) {
	toks, err := tokenize(expr)
	if err != nil {
		return nil, err
	}
	return &parser{toks: toks, names: names, values: values, usedNames: used.names, usedValues: used.values}, nil
}

type usage struct{ names, values map[string]bool }

func newUsage() *usage { return &usage{names: map[string]bool{}, values: map[string]bool{}} }

// check refuses placeholders given but never used, as DynamoDB does.
func (u *usage) check(names map[string]string, values map[string]types.AttributeValue) error {
	for n := range names {
		if !u.names[n] {
			return fmt.Errorf("value provided in ExpressionAttributeNames unused in expressions: keys: {%s}", n)
		}
	}
	for v := range values {
		if !u.values[v] {
			return fmt.Errorf("value provided in ExpressionAttributeValues unused in expressions: keys: {%s}", v)
		}
	}
	return nil
}

func (p *parser) peek() token {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return token{}
}

func (p *parser) next() token {
	t := p.peek()
	p.pos++
	return t
}

func (p *parser) isWord(w string) bool {
	t := p.peek()
	return t.kind == "word" && strings.EqualFold(t.text, w)
}

func (p *parser) expect(kind, text string) error {
	t := p.next()
	if t.kind != kind || !strings.EqualFold(t.text, text) {
		return fmt.Errorf("expected %q, got %q", text, t.text)
	}
	return nil
}

func (p *parser) done() error {
	if p.pos != len(p.toks) {
		return fmt.Errorf("unexpected %q after the expression", p.peek().text)
	}
	return nil
}

// operand is a path (attribute name) or a value.
type operand struct {
	path  string
	value types.AttributeValue
	// fn is if_not_exists(path, value) when set.
	fn   string
	args []operand
}

func (p *parser) operand() (operand, error) {
	t := p.next()
	switch t.kind {
	case "name":
		n, ok := p.names[t.text]
		if !ok {
			return operand{}, fmt.Errorf("an expression attribute name used in the document path is not defined; attribute name: %s", t.text)
		}
		p.usedNames[t.text] = true
		return operand{path: n}, nil
	case "value":
		v, ok := p.values[t.text]
		if !ok {
			return operand{}, fmt.Errorf("an expression attribute value used in expression is not defined; attribute value: %s", t.text)
		}
		p.usedValues[t.text] = true
		return operand{value: v}, nil
	case "word":
		if strings.EqualFold(t.text, "if_not_exists") {
			args, err := p.args()
			if err != nil {
				return operand{}, err
			}
			if len(args) != 2 || args[0].path == "" {
				return operand{}, fmt.Errorf("if_not_exists takes a path and a value")
			}
			return operand{fn: "if_not_exists", args: args}, nil
		}
		if reserved[strings.ToUpper(t.text)] {
			return operand{}, fmt.Errorf("attribute name is a reserved keyword; reserved keyword: %s", t.text)
		}
		return operand{path: t.text}, nil
	}
	return operand{}, fmt.Errorf("expected an operand, got %q", t.text)
}

// reserved is the part of DynamoDB's reserved words an adapter could
// plausibly write unescaped (the expression builder always escapes).
var reserved = map[string]bool{"STATE": true, "NAME": true, "STATUS": true, "TIMESTAMP": true, "DATA": true,
	"KEY": true, "VALUE": true, "TTL": true, "SIZE": true, "COUNT": true, "DATE": true, "TIME": true}

func (p *parser) args() ([]operand, error) {
	if err := p.expect("op", "("); err != nil {
		return nil, err
	}
	var out []operand
	for {
		o, err := p.operand()
		if err != nil {
			return nil, err
		}
		out = append(out, o)
		t := p.next()
		if t.kind == "op" && t.text == ")" {
			return out, nil
		}
		if t.kind != "op" || t.text != "," {
			return nil, fmt.Errorf("expected , or ) in an argument list, got %q", t.text)
		}
	}
}

// cond is a parsed condition.
type cond struct {
	op   string // and, or, not, cmp, between, in, fn
	sub  []*cond
	cmp  string
	fn   string
	args []operand
}

func (p *parser) condition() (*cond, error) { return p.or() }

func (p *parser) or() (*cond, error) {
	left, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.isWord("OR") {
		p.next()
		right, err := p.and()
		if err != nil {
			return nil, err
		}
		left = &cond{op: "or", sub: []*cond{left, right}}
	}
	return left, nil
}

func (p *parser) and() (*cond, error) {
	left, err := p.not()
	if err != nil {
		return nil, err
	}
	for p.isWord("AND") {
		p.next()
		right, err := p.not()
		if err != nil {
			return nil, err
		}
		left = &cond{op: "and", sub: []*cond{left, right}}
	}
	return left, nil
}

func (p *parser) not() (*cond, error) {
	if p.isWord("NOT") {
		p.next()
		c, err := p.not()
		if err != nil {
			return nil, err
		}
		return &cond{op: "not", sub: []*cond{c}}, nil
	}
	return p.primary()
}

var condFuncs = map[string]int{"attribute_exists": 1, "attribute_not_exists": 1, "begins_with": 2}

func (p *parser) primary() (*cond, error) {
	t := p.peek()
	if t.kind == "op" && t.text == "(" {
		p.next()
		c, err := p.condition()
		if err != nil {
			return nil, err
		}
		return c, p.expect("op", ")")
	}
	if t.kind == "word" {
		if n, ok := condFuncs[strings.ToLower(t.text)]; ok {
			p.next()
			args, err := p.args()
			if err != nil {
				return nil, err
			}
			if len(args) != n || args[0].path == "" {
				return nil, fmt.Errorf("invalid arguments to %s", t.text)
			}
			return &cond{op: "fn", fn: strings.ToLower(t.text), args: args}, nil
		}
	}
	left, err := p.operand()
	if err != nil {
		return nil, err
	}
	switch op := p.next(); {
	case op.kind == "op" && (op.text == "=" || op.text == "<>" || op.text == "<" || op.text == "<=" || op.text == ">" || op.text == ">="):
		right, err := p.operand()
		if err != nil {
			return nil, err
		}
		return &cond{op: "cmp", cmp: op.text, args: []operand{left, right}}, nil
	case op.kind == "word" && strings.EqualFold(op.text, "BETWEEN"):
		lo, err := p.operand()
		if err != nil {
			return nil, err
		}
		if err := p.expect("word", "AND"); err != nil {
			return nil, err
		}
		hi, err := p.operand()
		if err != nil {
			return nil, err
		}
		return &cond{op: "between", args: []operand{left, lo, hi}}, nil
	case op.kind == "word" && strings.EqualFold(op.text, "IN"):
		list, err := p.args()
		if err != nil {
			return nil, err
		}
		return &cond{op: "in", args: append([]operand{left}, list...)}, nil
	default:
		return nil, fmt.Errorf("expected a comparator, got %q", op.text)
	}
}

// resolve is an operand's value in item; false when the path is absent.
func resolve(o operand, item map[string]types.AttributeValue) (types.AttributeValue, bool) {
	switch {
	case o.value != nil:
		return o.value, true
	case o.fn == "if_not_exists":
		if v, ok := item[o.args[0].path]; ok {
			return v, true
		}
		return resolve(o.args[1], item)
	default:
		v, ok := item[o.path]
		return v, ok
	}
}

func (c *cond) eval(item map[string]types.AttributeValue) (bool, error) {
	switch c.op {
	case "and", "or":
		a, err := c.sub[0].eval(item)
		if err != nil {
			return false, err
		}
		b, err := c.sub[1].eval(item)
		if err != nil {
			return false, err
		}
		if c.op == "and" {
			return a && b, nil
		}
		return a || b, nil
	case "not":
		a, err := c.sub[0].eval(item)
		return !a, err
	case "fn":
		_, exists := item[c.args[0].path]
		switch c.fn {
		case "attribute_exists":
			return exists, nil
		case "attribute_not_exists":
			return !exists, nil
		default: // begins_with
			a, ok1 := resolve(c.args[0], item)
			b, ok2 := resolve(c.args[1], item)
			as, okA := a.(*types.AttributeValueMemberS)
			bs, okB := b.(*types.AttributeValueMemberS)
			return ok1 && ok2 && okA && okB && strings.HasPrefix(as.Value, bs.Value), nil
		}
	case "cmp":
		a, ok1 := resolve(c.args[0], item)
		b, ok2 := resolve(c.args[1], item)
		if !ok1 || !ok2 {
			return c.cmp == "<>", nil
		}
		r, comparable := compare(a, b)
		if !comparable {
			if c.cmp == "=" || c.cmp == "<>" {
				eq := equal(a, b)
				return eq == (c.cmp == "="), nil
			}
			return false, nil
		}
		switch c.cmp {
		case "=":
			return r == 0, nil
		case "<>":
			return r != 0, nil
		case "<":
			return r < 0, nil
		case "<=":
			return r <= 0, nil
		case ">":
			return r > 0, nil
		default:
			return r >= 0, nil
		}
	case "between":
		a, ok := resolve(c.args[0], item)
		lo, _ := resolve(c.args[1], item)
		hi, _ := resolve(c.args[2], item)
		if !ok {
			return false, nil
		}
		r1, ok1 := compare(a, lo)
		r2, ok2 := compare(a, hi)
		return ok1 && ok2 && r1 >= 0 && r2 <= 0, nil
	case "in":
		a, ok := resolve(c.args[0], item)
		if !ok {
			return false, nil
		}
		for _, o := range c.args[1:] {
			if b, ok := resolve(o, item); ok && equal(a, b) {
				return true, nil
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("unknown condition %q", c.op)
}

// compare orders two scalars of one type (N numerically, S and B
// bytewise); false when they are not both scalars of the same type.
func compare(a, b types.AttributeValue) (int, bool) {
	switch a := a.(type) {
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		x, ok1 := new(big.Rat).SetString(a.Value)
		y, ok2 := new(big.Rat).SetString(b.Value)
		if !ok1 || !ok2 {
			return 0, false
		}
		return x.Cmp(y), true
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		if !ok {
			return 0, false
		}
		return strings.Compare(a.Value, b.Value), true
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		if !ok {
			return 0, false
		}
		return strings.Compare(string(a.Value), string(b.Value)), true
	}
	return 0, false
}

// equal is DynamoDB's equality of two values of any type.
func equal(a, b types.AttributeValue) bool {
	if r, ok := compare(a, b); ok {
		return r == 0
	}
	return fmt.Sprintf("%#v", canonical(a)) == fmt.Sprintf("%#v", canonical(b))
}

// canonical is a comparable rendering of a value (sets sorted).
func canonical(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S:" + v.Value
	case *types.AttributeValueMemberN:
		if r, ok := new(big.Rat).SetString(v.Value); ok {
			return "N:" + r.RatString()
		}
		return "N:" + v.Value
	case *types.AttributeValueMemberB:
		return "B:" + string(v.Value)
	case *types.AttributeValueMemberBOOL:
		return fmt.Sprintf("BOOL:%v", v.Value)
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberL:
		parts := make([]string, len(v.Value))
		for i, e := range v.Value {
			parts[i] = canonical(e)
		}
		return "L:[" + strings.Join(parts, ",") + "]"
	case *types.AttributeValueMemberM:
		keys := sortedKeys(v.Value)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + canonical(v.Value[k])
		}
		return "M:{" + strings.Join(parts, ",") + "}"
	case *types.AttributeValueMemberSS:
		return "SS:" + strings.Join(sortedStrings(v.Value), ",")
	case *types.AttributeValueMemberNS:
		return "NS:" + strings.Join(sortedStrings(v.Value), ",")
	}
	return fmt.Sprintf("%T", v)
}

// update is a parsed update expression.
type update struct {
	set    []setAction
	remove []string
}

type setAction struct {
	path  string
	left  operand
	arith string // "", "+", "-"
	right operand
}

func (p *parser) update() (*update, error) {
	u := &update{}
	seen := map[string]bool{}
	for p.pos < len(p.toks) {
		t := p.next()
		clause := strings.ToUpper(t.text)
		if t.kind != "word" || (clause != "SET" && clause != "REMOVE") {
			return nil, fmt.Errorf("unsupported update clause %q (SET and REMOVE only)", t.text)
		}
		if seen[clause] {
			return nil, fmt.Errorf("the %s section can only be used once in an update expression", clause)
		}
		seen[clause] = true
		for {
			path, err := p.operand()
			if err != nil {
				return nil, err
			}
			if path.path == "" {
				return nil, fmt.Errorf("%s needs an attribute path", clause)
			}
			if clause == "REMOVE" {
				u.remove = append(u.remove, path.path)
			} else {
				if err := p.expect("op", "="); err != nil {
					return nil, err
				}
				a := setAction{path: path.path}
				if a.left, err = p.operand(); err != nil {
					return nil, err
				}
				if t := p.peek(); t.kind == "op" && (t.text == "+" || t.text == "-") {
					p.next()
					a.arith = t.text
					if a.right, err = p.operand(); err != nil {
						return nil, err
					}
				}
				u.set = append(u.set, a)
			}
			if t := p.peek(); t.kind == "op" && t.text == "," {
				p.next()
				continue
			}
			break
		}
	}
	// One path may appear in one action only.
	paths := map[string]bool{}
	for _, a := range u.set {
		if paths[a.path] {
			return nil, fmt.Errorf("two document paths overlap with each other: [%s]", a.path)
		}
		paths[a.path] = true
	}
	for _, r := range u.remove {
		if paths[r] {
			return nil, fmt.Errorf("two document paths overlap with each other: [%s]", r)
		}
		paths[r] = true
	}
	return u, nil
}

// apply computes the new item from old (values are read from old, as
// DynamoDB evaluates every action against the item before the update).
func (u *update) apply(old map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out := make(map[string]types.AttributeValue, len(old)+len(u.set))
	for k, v := range old {
		out[k] = v
	}
	for _, a := range u.set {
		left, ok := resolve(a.left, old)
		if !ok {
			return nil, fmt.Errorf("the provided expression refers to an attribute that does not exist in the item")
		}
		if a.arith == "" {
			out[a.path] = left
			continue
		}
		right, ok := resolve(a.right, old)
		if !ok {
			return nil, fmt.Errorf("the provided expression refers to an attribute that does not exist in the item")
		}
		x, okX := left.(*types.AttributeValueMemberN)
		y, okY := right.(*types.AttributeValueMemberN)
		if !okX || !okY {
			return nil, fmt.Errorf("an operand in the update expression has an incorrect data type")
		}
		rx, ok1 := new(big.Rat).SetString(x.Value)
		ry, ok2 := new(big.Rat).SetString(y.Value)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("a number does not parse")
		}
		if a.arith == "+" {
			rx.Add(rx, ry)
		} else {
			rx.Sub(rx, ry)
		}
		out[a.path] = &types.AttributeValueMemberN{Value: formatNumber(rx)}
	}
	for _, r := range u.remove {
		delete(out, r)
	}
	return out, nil
}

func formatNumber(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	return strings.TrimRight(strings.TrimRight(r.FloatString(38), "0"), ".")
}

// projection parses a projection expression into top-level names.
func (p *parser) projection() ([]string, error) {
	var out []string
	for {
		o, err := p.operand()
		if err != nil {
			return nil, err
		}
		if o.path == "" {
			return nil, fmt.Errorf("a projection names attributes")
		}
		out = append(out, o.path)
		if t := p.peek(); t.kind == "op" && t.text == "," {
			p.next()
			continue
		}
		return out, p.done()
	}
}
