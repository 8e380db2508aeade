package envvar

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/internal/lambdalog"
)

// Reader reads variables through getenv (os.Getenv in main) and collects
// the errors of bad values.
type Reader struct {
	getenv func(string) string
	errs   []error
}

// NewReader returns a Reader over getenv.
func NewReader(getenv func(string) string) *Reader {
	return &Reader{getenv: getenv}
}

// String returns the variable's value without surrounding space.
func (r *Reader) String(name string) string {
	return strings.TrimSpace(r.getenv(name))
}

// Duration sets *out to the variable's Go duration ("30s", "10m") when it
// is set.
func (r *Reader) Duration(name string, out *time.Duration) {
	if v := r.String(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s (%q) is not a Go duration: expected a number with a unit, e.g. 30s, 5m or 2h", name, v))
			return
		}
		*out = d
	}
}

// Int sets *out to the variable's decimal integer when it is set.
func (r *Reader) Int(name string, out *int) {
	if v := r.String(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s (%q) is not an integer: expected decimal digits, e.g. 5", name, v))
			return
		}
		*out = n
	}
}

// Level returns the variable's log level (DEBUG, INFO, WARN or ERROR in
// any case), or nil when it is unset or bad.
func (r *Reader) Level(name string) *slog.Level {
	v := r.String(name)
	if v == "" {
		return nil
	}
	level, err := lambdalog.ParseLevel(name, v)
	if err != nil {
		r.errs = append(r.errs, err)
		return nil
	}
	return &level
}

// LogLevel is the function's log level: AWS_LAMBDA_LOG_LEVEL (Lambda's
// own control, set from the function's ApplicationLogLevel; its filter
// drops lines below it anyway) when set, else LOCALEFLOW_LOG_LEVEL, else
// nil (INFO). Both set to different levels is an error naming both: the
// lines between the two would be written and dropped, or never written.
func (r *Reader) LogLevel() *slog.Level {
	own := r.Level(contract.EnvLogLevel)
	v := r.String(contract.EnvLambdaLogLevel)
	if v == "" {
		return own
	}
	level, err := lambdalog.ParseLambdaLevel(contract.EnvLambdaLogLevel, v)
	if err != nil {
		r.errs = append(r.errs, err)
		return own
	}
	if own != nil && *own != level {
		r.errs = append(r.errs, fmt.Errorf("%s (%s) disagrees with %s (%s), which Lambda sets from the function's ApplicationLogLevel: unset %s or set the same level",
			contract.EnvLogLevel, lambdalog.LevelName(*own), contract.EnvLambdaLogLevel, lambdalog.LevelName(level), contract.EnvLogLevel))
	}
	return &level
}

// Err joins the errors of every bad value read so far (nil if none).
func (r *Reader) Err() error {
	return errors.Join(r.errs...)
}

// AllowInsecureHTTP names the variable that lets a function talk to the CMS
// and the evidence provider over plain http://. Only local runs set it to
// "1" (the demo, the local runner and the tests, whose fake services listen
// on 127.0.0.1); a deployed function requires https://.
const AllowInsecureHTTP = contract.EnvAllowInsecureHTTP

// InsecureHTTPAllowed reports whether AllowInsecureHTTP is "1"; any other
// non-empty value is an error.
func (r *Reader) InsecureHTTPAllowed() bool {
	switch v := r.String(AllowInsecureHTTP); v {
	case "":
		return false
	case "1":
		return true
	default:
		r.errs = append(r.errs, fmt.Errorf("%s (%q) must be 1 or unset", AllowInsecureHTTP, v))
		return false
	}
}

// CheckServiceURL requires an https:// URL for the service variable name,
// or http:// as well when insecure is set (local runs only).
func CheckServiceURL(name, value string, insecure bool) error {
	switch {
	case value == "", strings.HasPrefix(value, "https://"):
		return nil
	case insecure && strings.HasPrefix(value, "http://"):
		return nil
	case strings.HasPrefix(value, "http://"):
		return fmt.Errorf("%s (%q) must be https:// (plain http only with %s=1, for local runs)", name, value, AllowInsecureHTTP)
	}
	return fmt.Errorf("%s (%q) must be an https:// URL, e.g. https://cms.example.com", name, value)
}

// Deployment names the variable that tells one deployment's metrics from
// another's in the same account: the resource prefix, published as the
// metric dimension "Deployment". The stack sets it on every function.
const Deployment = contract.EnvDeployment

// deploymentPattern is the resource prefix's rule (topology.ValidatePrefix).
var deploymentPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// Deployment returns the Deployment variable, or def when it is unset; a
// value that is not a resource prefix is an error.
func (r *Reader) Deployment(def string) string {
	v := r.String(Deployment)
	if v == "" {
		return def
	}
	if !deploymentPattern.MatchString(v) {
		r.errs = append(r.errs, fmt.Errorf("%s (%q) must be a resource prefix: %s", Deployment, v, deploymentPattern))
		return def
	}
	return v
}

// RefuseV1 reports whether v1 event signatures are refused:
// contract.EnvEventV1 is contract.EventV1Refuse or unset (refused), or
// contract.EventV1Accept; any other value is an error naming the
// variable, and so is the retired contract.EnvEventRefuseV1Retired when it
// is set (an operator who set it to 0 to accept v1 would otherwise be
// refused silently).
func (r *Reader) RefuseV1() bool {
	if v := r.String(contract.EnvEventRefuseV1Retired); v != "" {
		r.errs = append(r.errs, fmt.Errorf("%s (%q) is no longer read: set %s=%s to accept v1 event signatures, or leave it unset to refuse them",
			contract.EnvEventRefuseV1Retired, v, contract.EnvEventV1, contract.EventV1Accept))
	}
	switch v := contract.EventV1(r.String(contract.EnvEventV1)); v {
	case "", contract.EventV1Refuse:
		return true
	case contract.EventV1Accept:
		return false
	default:
		r.errs = append(r.errs, fmt.Errorf("%s (%q) must be %s or %s (default %s)", contract.EnvEventV1, v,
			contract.EventV1Accept, contract.EventV1Refuse, contract.EventV1Refuse))
		return true
	}
}
