package release

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/core"
)

// documentedRetryable reads docs/design.md's "Release error codes" table
// and reports, for code, whether its entry is marked (R) and whether the
// table has it at all. An entry is one comma- or semicolon-separated item
// of a row's first cell.
func documentedRetryable(t *testing.T, code string) (retryable, found bool) {
	t.Helper()
	raw, err := os.ReadFile("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "### Release error codes")
	if start < 0 {
		t.Fatal(`docs/design.md has no "Release error codes" section`)
	}
	section := doc[start:]
	if end := strings.Index(section[4:], "\n## "); end >= 0 {
		section = section[:end+4]
	}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, item := range strings.FieldsFunc(cells[1], func(r rune) bool { return r == ',' || r == ';' }) {
			if strings.Contains(item, "`"+code+"`") {
				return strings.Contains(item, "(R)"), true
			}
		}
	}
	return false, false
}

// TestStoreReadCodesAsDocumented (issue 39 finding 15): the docs call
// release.store.approval_invalid not retryable, the code wrapped it (like
// every refused stored item but one of another format) as the retryable
// coordinator.store.read_failed, so a release with a malformed approval
// row was retried into the DLQ under a code that names no row. A read
// that meets a refused stored item ends with the item's own code, final,
// as the table says; an unreachable store stays retryable.
func TestStoreReadCodesAsDocumented(t *testing.T) {
	for _, code := range []string{CodeStoreReadFailed, CodeSchemaUnsupported, CodeStoredApprovalInvalid, CodeRecordInvalid} {
		docRetryable, found := documentedRetryable(t, code)
		if !found {
			t.Fatalf("%s is not in docs/design.md's release error codes", code)
		}
		in := error(core.Fail(code))
		if code == CodeStoreReadFailed {
			in = errors.New("connection reset")
		}
		got := storeRead(fmt.Errorf("load: %w", in))
		if core.CodeOf(got) != code || core.IsRetryable(got) != docRetryable {
			t.Errorf("a read refused with %s ends %s (retryable %v); docs/design.md: %s, retryable %v",
				code, core.CodeOf(got), core.IsRetryable(got), code, docRetryable)
		}
	}
}
