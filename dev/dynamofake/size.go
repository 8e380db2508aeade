package dynamofake

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ItemSize is DynamoDB's size of an item: per attribute, its name's bytes
// plus its value's (strings and binaries their bytes, numbers about one
// byte per two significant digits plus one, lists and maps 3 bytes plus
// one per element and their elements, booleans and nulls one).
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberBytes(v.Value)
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberBytes(s)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 1
}

func numberBytes(s string) int {
	digits := 0
	for _, c := range strings.TrimLeft(strings.SplitN(strings.ToLower(s), "e", 2)[0], "-+0.") {
		if c >= '0' && c <= '9' {
			digits++
		}
	}
	return (digits+1)/2 + 1
}
