package conformance

import "testing"

func TestValidRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		values []string
		ok     bool
	}{
		{[]string{"0"}, true}, {[]string{"120"}, true}, {[]string{" 5 "}, true},
		{[]string{"Wed, 21 Oct 2015 07:28:00 GMT"}, true},
		{[]string{"soon"}, false}, {[]string{""}, false}, {[]string{"-1"}, false}, {[]string{"1.5"}, false},
		{[]string{"1", "2"}, false}, {nil, false},
	} {
		if got := validRetryAfter(tc.values); got != tc.ok {
			t.Errorf("%q: %v, want %v", tc.values, got, tc.ok)
		}
	}
}
