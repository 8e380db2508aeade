package release_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// keySet is an event key set as a function reads it from its secret
// (secretkey.Cache): Keys is the set in use, Refresh reads the secret now.
type keySet struct {
	mu              sync.Mutex
	inUse, inSecret [][]byte
	refreshes       int
}

func (k *keySet) Keys(context.Context) ([][]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.inUse, nil
}

func (k *keySet) Refresh(context.Context) ([][]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.refreshes++
	if k.inSecret != nil {
		k.inUse = k.inSecret
	}
	return k.inUse, nil
}

// staticSet is a key set without Refresh.
type staticSet [][]byte

func (s staticSet) Keys(context.Context) ([][]byte, error) { return s, nil }

func testKey(label string) []byte {
	s := sha256.Sum256([]byte("rotation-" + label))
	return s[:]
}

// TestEventKeyRotationKeepsSealedPlans: finding 1. After rotation step 2
// (event secret NEW,OLD) a new execution environment reads NEW as its
// current key; the plan sealed under OLD before the step must still pass
// its seal check there and the release be delivered, not blocked as
// coordinator.plan.seal_invalid.
func TestEventKeyRotationKeepsSealedPlans(t *testing.T) {
	b := setup(t)
	oldKey, newKey := b.fx.EventKey, testKey("event")
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Events.KeySet = staticSet{oldKey} })
	plan := releasetest.NewPlan("evt-rot", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	b.run(t, "evt-rot")
	// Step 2, a cold start: the set is NEW,OLD and its first key is the
	// coordinator's event key (functions/coordinator build).
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) {
		d.EventKey, d.Events.KeySet = newKey, staticSet{newKey, oldKey}
	})
	b.fx.EventKey = newKey // step 3: producers sign with NEW
	b.ingestResult(t, plan, "fr-FR", releasetest.ResultOptions{})
	if o := b.run(t, "evt-rot"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("after the rotation: %+v", o)
	}
	if o, err := b.c.Deliver(b.ctx, "evt-rot"); err != nil || o.Status != release.OutcomeDelivered {
		t.Fatalf("deliver: %+v, %v", o, err)
	}
}

// TestPlanResealedUnderTheCurrentEventKey: a plan sealed under a previous
// key is sealed again under the current one by its next step, so the
// previous key can leave the set (runbook step 4) without refusing it.
// SealKey names the key.
func TestPlanResealedUnderTheCurrentEventKey(t *testing.T) {
	b := setup(t)
	oldKey, newKey := b.fx.EventKey, testKey("event")
	plan := releasetest.NewPlan("evt-reseal", "de-DE", "fr-FR", "it-IT")
	b.ingestPlan(t, plan)
	if k := b.snap(t, "evt-reseal").Plan.SealKey; k != release.SealKeyID(oldKey) {
		t.Fatalf("seal key %q", k)
	}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) {
		d.EventKey, d.Events.KeySet = newKey, staticSet{newKey, oldKey}
	})
	b.fx.EventKey = newKey
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	b.run(t, "evt-reseal")
	if k := b.snap(t, "evt-reseal").Plan.SealKey; k != release.SealKeyID(newKey) {
		t.Fatalf("plan not resealed under NEW: %q", k)
	}
	// Step 4: OLD leaves the set; the release goes on.
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Events.KeySet = staticSet{newKey} })
	b.ingestResult(t, plan, "fr-FR", releasetest.ResultOptions{})
	b.ingestResult(t, plan, "it-IT", releasetest.ResultOptions{})
	b.run(t, "evt-reseal")
	if o := b.run(t, "evt-reseal"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("after step 4: %+v", o)
	}
	if release.SealKeyID(oldKey) == release.SealKeyID(newKey) || len(release.SealKeyID(oldKey)) != 16 {
		t.Fatal("seal key ids must be 16 hex digits, one per key")
	}
}

// TestSealFromANewerEnvironmentRereadsTheSet: an execution environment
// whose set is still OLD (its TTL has not passed) meets a plan another
// environment sealed under NEW after step 2: the check re-reads the set
// once instead of refusing the plan for good.
func TestSealFromANewerEnvironmentRereadsTheSet(t *testing.T) {
	b := setup(t)
	oldKey, newKey := b.fx.EventKey, testKey("event")
	plan := releasetest.NewPlan("evt-fresh", "de-DE")
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) {
		d.EventKey, d.Events.KeySet = newKey, staticSet{newKey, oldKey}
	})
	b.ingestPlan(t, plan)
	stale := &keySet{inUse: [][]byte{oldKey}, inSecret: [][]byte{newKey, oldKey}}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.EventKey, d.Events.KeySet = oldKey, stale })
	if err := b.c.CheckPlan(b.ctx, b.snap(t, "evt-fresh").Plan); err != nil || stale.refreshes != 1 {
		t.Fatalf("check: %v after %d refreshes", err, stale.refreshes)
	}
	// A seal under no key of the fresh set is still refused.
	gone := &keySet{inUse: [][]byte{testKey("other")}}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Events.KeySet = gone })
	wantCode(t, b.c.CheckPlan(b.ctx, b.snap(t, "evt-fresh").Plan), release.CodePlanSealInvalid)
}

// TestApprovalAndPublicationKeyRotation: finding 2. Approvals and a
// prepared delivery stored under the OLD seeds are re-checked after the
// seeds rotate (set NEW,OLD): they verify under the key their key id
// names, the release is delivered, and new records carry NEW's id.
func TestApprovalAndPublicationKeyRotation(t *testing.T) {
	b := setup(t)
	oldA, oldP := b.fx.ApprovalSeed, b.fx.PublicationKey
	newA, newP := testKey("approval"), testKey("publication")
	plan := releasetest.NewPlan("evt-seeds", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	b.ingestResult(t, plan, "fr-FR", releasetest.ResultOptions{})
	b.run(t, "evt-seeds")
	if o := b.run(t, "evt-seeds"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("before the rotation: %+v", o)
	}
	oldAuth, _ := release.NewApprovalAuthority(oldA)
	oldPub, _ := release.NewPublicationAuthority(oldP)
	s := b.snap(t, "evt-seeds")
	if s.Delivery.KeyID != oldPub.KeyID() || len(s.Approvals) != 2 {
		t.Fatalf("delivery key id %q", s.Delivery.KeyID)
	}
	for _, a := range s.Approvals {
		if a.KeyID != oldAuth.KeyID() {
			t.Fatalf("approval key id %q, want %q", a.KeyID, oldAuth.KeyID())
		}
	}
	// Rotation step 3 of the runbook: NEW signs, OLD verifies.
	approval, err := release.NewApprovalAuthority(newA, oldA)
	if err != nil {
		t.Fatal(err)
	}
	publication, err := release.NewPublicationAuthority(newP, oldP)
	if err != nil {
		t.Fatal(err)
	}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Approval, d.Publication = approval, publication })
	if o, err := b.c.Deliver(b.ctx, "evt-seeds"); err != nil || o.Status != release.OutcomeDelivered {
		t.Fatalf("deliver after the rotation: %+v, %v", o, err)
	}
	if o := b.run(t, "evt-seeds"); o.Status != release.OutcomeDelivered {
		t.Fatalf("run after delivery: %+v", o)
	}
	// A new release signs with NEW.
	next := releasetest.NewPlan("evt-seeds-2", "de-DE")
	b.ingestPlan(t, next)
	b.ingestResult(t, next, "de-DE", releasetest.ResultOptions{})
	b.run(t, "evt-seeds-2")
	s = b.snap(t, "evt-seeds-2")
	for _, a := range s.Approvals {
		if a.KeyID != approval.KeyID() {
			t.Fatalf("new approval key id %q", a.KeyID)
		}
	}
	if s.Delivery == nil || s.Delivery.KeyID != publication.KeyID() {
		t.Fatalf("new delivery %+v", s.Delivery)
	}
	// Once OLD is gone, a record it signed is refused (the runbook's
	// step 4 waits until none is needed).
	only, _ := release.NewApprovalAuthority(newA)
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Approval = only })
	var apv *release.ApprovalRecord
	for _, a := range b.snap(t, "evt-seeds").Approvals {
		apv = a
	}
	if _, err := b.c.OpenApproval(apv.KeyID, apv.Token); err == nil {
		t.Fatal("an approval of a dropped key verified")
	}
}

// TestStoredTokensNameTheirKey: a key id names exactly one key of the set:
// a token under OLD verifies with OLD's id, is refused with NEW's id, an
// unknown id or none (a record without a key id is not of storage format
// 1).
func TestStoredTokensNameTheirKey(t *testing.T) {
	oldSeed, newSeed := testKey("old"), testKey("new")
	old, _ := release.NewApprovalAuthority(oldSeed)
	token, err := old.Sign([]byte(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := release.NewApprovalAuthority(newSeed, oldSeed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.OpenKey("", token); err == nil {
		t.Fatal("a token without a key id verified")
	}
	if _, err := set.OpenKey(old.KeyID(), token); err != nil {
		t.Fatalf("record under OLD refused: %v", err)
	}
	if _, err := set.OpenKey(set.KeyID(), token); err == nil {
		t.Fatal("a key id naming another key verified")
	}
	if _, err := set.OpenKey("0123456789abcdef", token); err == nil {
		t.Fatal("an unknown key id verified")
	}
	if _, err := release.NewApprovalAuthority(newSeed, newSeed); !core.HasCode(err, release.CodeAuthorityKeyInvalid) {
		t.Fatalf("a set repeating a key: %v", err)
	}
	pub := ed25519.NewKeyFromSeed(newSeed).Public().(ed25519.PublicKey)
	if got := release.KeyID(pub); got != set.KeyID() || !release.ValidKeyID(got) {
		t.Fatalf("key id %q", got)
	}
}

// TestReceiptIssuerRotation: finding 8. An issuer rotating its key is
// trusted under both keys for its own kind only; the configuration may
// name it at most MaxIssuerKeys times.
func TestReceiptIssuerRotation(t *testing.T) {
	fx := releasetest.NewFixture()
	newKey := ed25519.NewKeyFromSeed(testKey("issuer"))
	ti := fx.TrustedIssuers()
	ti.Previous = map[string][]ed25519.PublicKey{fx.Issuer: {newKey.Public().(ed25519.PublicKey)}}
	if err := ti.Validate(); err != nil {
		t.Fatal(err)
	}
	v := ti.Verifiers()
	now := time.Now()
	sha := core.SHA256Hex([]byte("x"))
	for _, key := range []ed25519.PrivateKey{fx.IssuerKey, newKey} {
		f := fx
		f.IssuerKey = key
		if _, err := v.Quality.Verify(f.Receipt(release.KindQuality, "req-1", sha, now, time.Hour), "req-1", sha, now); err != nil {
			t.Fatalf("receipt refused: %v", err)
		}
	}
	// The rotating key does not sign another kind, even under its name.
	p := contract.ReceiptPayload{Kind: release.KindHumanReview, Issuer: fx.Issuer, RequestID: "req-1", ResultSHA256: sha,
		IssuedAtMS: core.Millis(now), ExpiresAtMS: core.Millis(now.Add(time.Hour))}
	f := fx
	f.HumanIssuerKey, f.HumanIssuer = newKey, fx.Issuer
	if _, err := v.HumanReview.Verify(f.SignReceipt(p), "req-1", sha, now); !core.HasCode(err, release.CodeReceiptIssuerUntrusted) {
		t.Fatalf("human review receipt under the quality issuer's new key: %v", err)
	}
	for name, bad := range map[string]map[string][]ed25519.PublicKey{
		"unknown issuer": {"nobody": {newKey.Public().(ed25519.PublicKey)}},
		"repeated key":   {fx.Issuer: {fx.IssuerKey.Public().(ed25519.PublicKey)}},
		"too many keys":  {fx.Issuer: {testPub("a"), testPub("b"), testPub("c"), testPub("d")}},
		"other kind's":   {fx.Issuer: {fx.HumanIssuerKey.Public().(ed25519.PublicKey)}},
	} {
		ti.Previous = bad
		if err := ti.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func testPub(label string) ed25519.PublicKey {
	return ed25519.NewKeyFromSeed(testKey(label)).Public().(ed25519.PublicKey)
}

// TestDeliveredReleaseIgnoresItsSealAfterEventKeyRotation (day-2
// simulation seed 2718): a release delivered under OLD is never resealed
// (no step of it runs again); once OLD leaves the set a late input for it
// (a late duplicate, a quarantine replay) reports delivered, never
// coordinator.plan.seal_invalid, and the release is not blocked.
func TestDeliveredReleaseIgnoresItsSealAfterEventKeyRotation(t *testing.T) {
	b := setup(t)
	oldKey, newKey := b.fx.EventKey, testKey("event")
	plan := releasetest.NewPlan("evt-old-seal", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	for i := 0; i < 4; i++ {
		if o := b.run(t, "evt-old-seal"); o.Status == release.OutcomeDeliveryReady {
			break
		}
	}
	if o, err := b.c.Deliver(b.ctx, "evt-old-seal"); err != nil || o.Status != release.OutcomeDelivered {
		t.Fatalf("deliver = %+v, %v", o, err)
	}
	if k := b.snap(t, "evt-old-seal").Plan.SealKey; k != release.SealKeyID(oldKey) {
		t.Fatalf("seal key %q", k)
	}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) {
		d.EventKey, d.Events.KeySet = newKey, staticSet{newKey}
	})
	for i := 0; i < 2; i++ {
		o, err := b.c.RunNextRelease(b.ctx, "evt-old-seal")
		if err != nil || o.Status != release.OutcomeDelivered || o.Changed {
			t.Fatalf("run after OLD left the set = %+v, %v", o, err)
		}
		if o, err = b.c.Deliver(b.ctx, "evt-old-seal"); err != nil || o.Status != release.OutcomeDelivered || o.Changed {
			t.Fatalf("deliver after OLD left the set = %+v, %v", o, err)
		}
	}
	if s := b.snap(t, "evt-old-seal"); s.Blocked != nil {
		t.Fatalf("delivered release blocked: %+v", s.Blocked)
	}
}
