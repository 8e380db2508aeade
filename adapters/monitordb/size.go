package monitordb

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ItemSize is the size DynamoDB bills an item by: for each attribute, the
// UTF-8 bytes of its name plus the size of its value (strings: UTF-8
// bytes; binary: bytes; numbers: 1 byte per two significant digits plus 1;
// booleans and null: 1; lists and maps: 3 bytes plus 1 per element, map
// keys included). A write costs one write unit per started KB of the
// larger of the item before and after it.
func ItemSize(av map[string]types.AttributeValue) int {
	n := 0
	for name, v := range av {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberSS:
		n := 0
		for _, e := range v.Value {
			n += len(e)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, e := range v.Value {
			n += numberSize(e)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, e := range v.Value {
			n += len(e)
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
	default: // BOOL, NULL
		return 1
	}
}

// numberSize is the stored size of a number: its significant digits
// (leading and trailing zeros dropped), two per byte, plus 1.
func numberSize(s string) int {
	mantissa, _, _ := strings.Cut(strings.ToLower(s), "e")
	digits := strings.Trim(strings.NewReplacer("-", "", "+", "", ".", "").Replace(mantissa), "0")
	return (len(digits)+1)/2 + 1
}
