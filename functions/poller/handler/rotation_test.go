package handler_test

import (
	"context"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/functions/poller/handler"
)

var newCMSKey = []byte("localeflow-cms-test-key-00000002")

// redeploy replaces the poller (a cold start) with one whose CMS key set
// is current + previous.
func (e *env) redeploy(current []byte, previous ...[]byte) {
	e.t.Helper()
	client, err := cms.New(cms.Config{BaseURL: e.cmsURL, Key: current, PreviousKeys: previous, Timeout: 2 * time.Second, Clock: e.clock})
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := e.cfg
	cfg.Reader = client
	if e.h, err = handler.New(cfg); err != nil {
		e.t.Fatal(err)
	}
	e.lambda = lambda.NewHandler(e.h.Handle)
}

// TestCMSKeyRotationWhileChangesArePolled follows the rotation procedure
// while a change is polled: the CMS accepts the new key, the poller gets
// the key set "new,old", the CMS signs with the new key, the old key is
// dropped on both sides. No poll fails. Before key sets, the poller held
// one key: whichever side switched first turned the next answer into a
// final lifecycle_monitor.response_invalid (the "single key" subtest).
func TestCMSKeyRotationWhileChangesArePolled(t *testing.T) {
	t.Run("key set", func(t *testing.T) {
		e := setup(t)
		steps := make([]cmstest.Step, 0, 8)
		for range 6 {
			steps = append(steps, cmstest.StatusStep("processing"))
		}
		e.cms.Script("evt-poller-0001", append(steps, cmstest.StatusStep("published"))...)
		e.intake()
		e.follow() // old key on both sides
		e.cms.Accept(newCMSKey)
		e.follow()
		e.redeploy(newCMSKey, testKey) // the secret now holds "new,old"
		e.follow()
		e.cms.Rotate(newCMSKey) // the CMS signs with the new key
		e.follow()
		e.redeploy(newCMSKey) // the secret holds "new" only
		e.cms.Forget()
		for e.status("evt-poller-0001").State != monitor.StateTerminal {
			e.follow()
		}
		st := e.status("evt-poller-0001")
		if st.RemoteStatus != "published" || st.LastErrorCode != "" || st.PollAttempts != 7 {
			t.Fatalf("after the rotation: %+v", st)
		}
	})
	t.Run("single key", func(t *testing.T) {
		e := setup(t)
		e.cms.Script("evt-poller-0001", cmstest.StatusStep("processing"), cmstest.StatusStep("processing"))
		e.intake()
		e.follow()
		e.cms.Accept(newCMSKey)
		e.redeploy(newCMSKey) // no previous key: the CMS still signs with the old one
		e.follow()
		st := e.status("evt-poller-0001")
		if st.State != monitor.StateFailed || !strings.Contains(st.LastErrorCode, "response_invalid") {
			t.Fatalf("single-key rotation: %+v", st)
		}
	})
}

// TestEventKeyRotationForDispatches: dispatches signed with the previous
// event key are accepted while it is in the poller's key set, refused after.
func TestEventKeyRotationForDispatches(t *testing.T) {
	newEventKey := []byte("localeflow-event-test-key-000002")
	e := setup(t, func(c *handler.Config) { c.EventKeys = [][]byte{newEventKey, testEventKey} })
	e.intake() // signed with testEventKey, the previous key
	if st := e.status("evt-poller-0001"); st.State != monitor.StatePending {
		t.Fatalf("dispatch under the previous key: %+v", st)
	}
	e2 := setup(t, func(c *handler.Config) { c.EventKeys = [][]byte{newEventKey} })
	resp := e2.invokeSQS(testdata(t, "sqs_intake.json"))
	if len(resp.BatchItemFailures) != 0 || e2.store.Len() != 0 {
		t.Fatalf("dispatch under a dropped key registered: %+v, %d records", resp, e2.store.Len())
	}
}

// fakeSecret is a Secrets Manager secret an operator rotates.
type fakeSecret struct {
	mu    sync.Mutex
	value string
}

func (f *fakeSecret) put(keys ...[]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = hex.EncodeToString(k)
	}
	f.value = strings.Join(parts, ",")
}

func (f *fakeSecret) GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(f.value)}, nil
}

// TestCMSKeyRotationWithoutColdStart: the same rotation with one running
// poller whose CMS key set is re-read every minute: changing the secret is
// enough (no redeploy), and no poll fails.
func TestCMSKeyRotationWithoutColdStart(t *testing.T) {
	e := setup(t)
	secret := &fakeSecret{}
	secret.put(testKey)
	keys, err := secretkey.NewCache(context.Background(), secretkey.Source{Stem: "LOCALEFLOW_CMS_KEY", SecretARN: "arn:aws:secretsmanager:x"},
		secret, "CMS", secretkey.MinBytes(16), time.Minute, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	client, err := cms.New(cms.Config{BaseURL: e.cmsURL, KeySet: keys, Timeout: 2 * time.Second, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.cfg
	cfg.Reader = client
	if e.h, err = handler.New(cfg); err != nil {
		t.Fatal(err)
	}
	e.lambda = lambda.NewHandler(e.h.Handle)
	steps := make([]cmstest.Step, 0, 12)
	for range 11 {
		steps = append(steps, cmstest.StatusStep("processing"))
	}
	e.cms.Script("evt-poller-0001", append(steps, cmstest.StatusStep("published"))...)
	e.intake()
	e.follow()
	e.cms.Accept(newCMSKey)
	secret.put(newCMSKey, testKey) // step 2, no redeploy
	e.follow()
	e.follow()
	e.follow() // 90 s later: the set has been re-read
	e.cms.Rotate(newCMSKey)
	e.follow()
	e.follow()
	secret.put(newCMSKey)
	e.follow()
	e.follow()
	e.follow()
	e.cms.Forget()
	for e.status("evt-poller-0001").State != monitor.StateTerminal {
		e.follow()
	}
	st := e.status("evt-poller-0001")
	if st.RemoteStatus != "published" || st.LastErrorCode != "" || st.PollAttempts != 12 {
		t.Fatalf("after the rotation: %+v", st)
	}
	var newSigned bool
	for _, r := range e.cms.Requests() {
		if !r.SignatureValid {
			t.Fatalf("a request was refused: %+v", r)
		}
		newSigned = true
	}
	if !newSigned {
		t.Fatal("no request")
	}
}
