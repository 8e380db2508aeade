package release_test

import (
	"errors"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/adapters/secretkey/secretkeytest"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// environment is one coordinator execution environment started now: its
// event key set is the real secretkey.Cache (TTL 1 min), read from secret
// at this cold start, its current key the coordinator's event key
// (functions/coordinator wires it so).
func (b *bundle) environment(t *testing.T, secret *secretkeytest.Secret) *release.Coordinator {
	t.Helper()
	src := secretkey.Source{Stem: "LOCALEFLOW_EVENT_KEY", SecretARN: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:event-key-AbCdEf"}
	cache, err := secretkey.NewCache(b.ctx, src, secret, "event", secretkey.MinBytes(16), time.Minute, b.clock)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := cache.Keys(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	deps := b.deps
	deps.EventKey, deps.Events.KeySet = keys[0], cache
	c, err := release.NewCoordinator(deps, b.clock, b.log, b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestResealRaceDuringRotationIsRetriedNotBlocked (day-2 simulation,
// key-reload seed 100): during event key rotation step 2 (secret
// NEW,OLD, wait one TTL) environment A reads NEW,OLD and its step reseals
// the plan under NEW; environment B, whose set still holds only OLD and
// which read the secret 5.5 s before, meets that seal in the same second.
// Its re-read is refused by the 10 s limit, so its set may predate the
// seal: the step must end with the retryable
// coordinator.plan.seal_unverified, not the final seal_invalid that
// blocked the release for good, and go on once the limit has passed.
func TestResealRaceDuringRotationIsRetriedNotBlocked(t *testing.T) {
	b := setup(t)
	oldKey, newKey := b.fx.EventKey, testKey("event")
	secret := &secretkeytest.Secret{}
	secret.Set(nil, oldKey)
	plan := releasetest.NewPlan("evt-race", "de-DE")
	b.ingestPlan(t, plan)
	b.clock.Advance(50 * time.Second)
	envB := b.environment(t, secret) // reads OLD
	b.clock.Advance(5 * time.Second)
	secret.Set(nil, newKey, oldKey) // runbook step 2
	envA := b.environment(t, secret)
	if _, err := envA.RunNextRelease(b.ctx, "evt-race"); err != nil {
		t.Fatalf("environment A: %v", err)
	}
	if k := b.snap(t, "evt-race").Plan.SealKey; k != release.SealKeyID(newKey) {
		t.Fatalf("plan not resealed under NEW by environment A: %q", k)
	}
	b.clock.Advance(500 * time.Millisecond)
	_, err := envB.RunNextRelease(b.ctx, "evt-race")
	wantCode(t, err, release.CodePlanSealUnverified)
	if !core.IsRetryable(err) {
		t.Fatalf("%v is final: the release would block for good during a safe rotation step", err)
	}
	if s := b.snap(t, "evt-race"); s.Blocked != nil {
		t.Fatalf("release blocked: %+v", s.Blocked)
	}
	// The message returns after the limit: B re-reads NEW,OLD and goes on.
	b.clock.Advance(secretkey.RefreshAfter)
	if o, err := envB.RunNextRelease(b.ctx, "evt-race"); err != nil {
		t.Fatalf("environment B after the limit = %+v, %v", o, err)
	}
}

// TestAlteredPlanBlocksOnceTheSetIsReread: the retryable answer is
// bounded. An altered plan (a job dropped) met right after the set was
// read is not final yet (the re-read was refused); the next step after
// the limit re-reads the set, the seal still matches none of its keys,
// and the release blocks with the final coordinator.plan.seal_invalid. A
// failed re-read (Secrets Manager down) is retryable too.
func TestAlteredPlanBlocksOnceTheSetIsReread(t *testing.T) {
	b := setup(t)
	secret := &secretkeytest.Secret{}
	secret.Set(nil, b.fx.EventKey)
	plan := releasetest.NewPlan("evt-altered", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	p := *b.snap(t, "evt-altered").Plan
	p.Jobs, p.Version = p.Jobs[:1], p.Version+1
	if err := b.store.Put(b.ctx, &p, p.Version-1); err != nil {
		t.Fatal(err)
	}
	env := b.environment(t, secret)
	b.clock.Advance(time.Second)
	_, err := env.RunNextRelease(b.ctx, "evt-altered")
	wantCode(t, err, release.CodePlanSealUnverified)
	if !core.IsRetryable(err) || b.snap(t, "evt-altered").Blocked != nil {
		t.Fatalf("refused re-read: %v, blocked %+v", err, b.snap(t, "evt-altered").Blocked)
	}
	// The secret cannot be read: still unverified, still not blocked.
	b.clock.Advance(secretkey.RefreshAfter)
	secret.Set(errors.New("secrets manager unavailable"), b.fx.EventKey)
	_, err = env.RunNextRelease(b.ctx, "evt-altered")
	wantCode(t, err, release.CodePlanSealUnverified)
	if !core.IsRetryable(err) || b.snap(t, "evt-altered").Blocked != nil {
		t.Fatalf("failed re-read: %v, blocked %+v", err, b.snap(t, "evt-altered").Blocked)
	}
	// A re-read that succeeds and matches nothing: final, blocked.
	b.clock.Advance(secretkey.RefreshAfter)
	secret.Set(nil, b.fx.EventKey)
	_, err = env.RunNextRelease(b.ctx, "evt-altered")
	wantCode(t, err, release.CodePlanSealInvalid)
	if core.IsRetryable(err) {
		t.Fatalf("%v retryable after a fresh re-read", err)
	}
	s := b.snap(t, "evt-altered")
	if s.Blocked == nil || s.Blocked.Code != release.CodePlanSealInvalid {
		t.Fatalf("altered plan not blocked with seal_invalid: %+v", s.Blocked)
	}
	// A new environment meets it: its set may predate the seal until it
	// re-reads it (one retryable answer, even when the re-read is
	// allowed at once: same instant); the next step after the limit is
	// final. A returning message's re-publication checks the seal before
	// the step does: neither check makes the other's answer retryable.
	b.clock.Advance(secretkey.RefreshAfter)
	fresh := b.environment(t, secret)
	b.clock.Advance(secretkey.RefreshAfter)
	wantCode(t, fresh.CheckPlan(b.ctx, &p), release.CodePlanSealUnverified)
	b.clock.Advance(secretkey.RefreshAfter)
	wantCode(t, fresh.CheckPlan(b.ctx, &p), release.CodePlanSealInvalid)
	wantCode(t, fresh.CheckPlan(b.ctx, &p), release.CodePlanSealInvalid)
}
