package envvar_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/internal/envvar"
	"github.com/localeflow/localeflow/internal/lambdalog"
)

func reader(env map[string]string) *envvar.Reader {
	return envvar.NewReader(func(k string) string { return env[k] })
}

func TestString(t *testing.T) {
	if got := reader(map[string]string{"A": "  x y \n"}).String("A"); got != "x y" {
		t.Fatalf("String = %q", got)
	}
}

func TestDurationAndInt(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantD   time.Duration
		wantN   int
		wantErr []string // substrings of the joined error; nil = no error
	}{
		{"unset keeps defaults", map[string]string{"D": " ", "N": ""}, time.Minute, 7, nil},
		{"set", map[string]string{"D": " 45s ", "N": "12"}, 45 * time.Second, 12, nil},
		{"negative", map[string]string{"D": "-1s", "N": "-3"}, -time.Second, -3, nil},
		{"bad duration", map[string]string{"D": "soon", "N": "2"}, time.Minute, 2, []string{`D ("soon") is not a Go duration: expected a number with a unit, e.g. 30s`}},
		{"bad integer", map[string]string{"N": "five"}, time.Minute, 7, []string{`N ("five") is not an integer: expected decimal digits`}},
		{"both bad", map[string]string{"D": "10", "N": "1.5"}, time.Minute, 7, []string{`D ("10") is not a Go duration`, `N ("1.5") is not an integer`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := reader(tt.env)
			d, n := time.Minute, 7
			r.Duration("D", &d)
			r.Int("N", &n)
			if d != tt.wantD || n != tt.wantN {
				t.Fatalf("d=%s n=%d", d, n)
			}
			err := r.Err()
			if (err != nil) != (tt.wantErr != nil) {
				t.Fatalf("err = %v", err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want %q", err, want)
				}
			}
			// Durations and integers are never secret: the error names the
			// value given (wantErr), so the operator sees what to fix. Key
			// material is read with String and checked by secretkey, whose
			// errors never echo it.
		})
	}
}

func TestLevel(t *testing.T) {
	r := reader(map[string]string{"L": "warn", "BAD": "loud"})
	if got := r.Level("L"); got == nil || *got != slog.LevelWarn {
		t.Fatalf("Level(L) = %v", got)
	}
	if got := r.Level("UNSET"); got != nil || r.Err() != nil {
		t.Fatalf("Level(UNSET) = %v, %v", got, r.Err())
	}
	if got := r.Level("BAD"); got != nil || r.Err() == nil || !strings.Contains(r.Err().Error(), `BAD ("loud") must be DEBUG, INFO, WARN or ERROR`) {
		t.Fatalf("Level(BAD) = %v, %v", got, r.Err())
	}
}

// TestLogLevelHonoursLambda: AWS_LAMBDA_LOG_LEVEL (Lambda's own control,
// set from the function's ApplicationLogLevel) was ignored in favour of
// LOCALEFLOW_LOG_LEVEL. It now sets the level; LOCALEFLOW_LOG_LEVEL is the
// fallback; both set to different levels is refused naming both.
func TestLogLevelHonoursLambda(t *testing.T) {
	for _, tc := range []struct {
		lambda, own string
		want        string // "" nil
		err         string
	}{
		{"", "", "", ""},
		{"", "debug", "DEBUG", ""},
		{"WARN", "", "WARN", ""},
		{"fatal", "", "FATAL", ""},
		{"TRACE", "", "TRACE", ""},
		{"WARN", "WARN", "WARN", ""},
		{"WARN", "DEBUG", "WARN", "LOCALEFLOW_LOG_LEVEL (DEBUG) disagrees with AWS_LAMBDA_LOG_LEVEL (WARN)"},
		{"LOUD", "", "", "AWS_LAMBDA_LOG_LEVEL (\"LOUD\") must be TRACE, DEBUG, INFO, WARN, ERROR or FATAL"},
	} {
		env := map[string]string{"AWS_LAMBDA_LOG_LEVEL": tc.lambda, "LOCALEFLOW_LOG_LEVEL": tc.own}
		r := reader(env)
		got := r.LogLevel()
		err := r.Err()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: err %v", tc, err)
			}
			continue
		}
		if err != nil || (got == nil) != (tc.want == "") || (got != nil && lambdalog.LevelName(*got) != tc.want) {
			t.Errorf("%+v: %v %v", tc, got, err)
		}
	}
}
