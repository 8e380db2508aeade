package sim

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/functions/coordinator/config"
)

// Day2KeyReload: the event key secret is re-read by the running
// coordinator (docs/design.md "Plan seal", docs/security.md "Event key
// (HMAC)", docs/runbook.md "Key reload failed") while the operator's value is malformed
// for a while: a stray comma (`NEW,OLD,`). When the event-key kind is off
// on the seed, the operator is doing rotation step 2 by the secret alone
// (no redeploy: the running environments re-read it after
// LOCALEFLOW_KEY_TTL): `NEW,OLD,` for a while, then `NEW,OLD`. Otherwise
// the stray comma lands on the secret as it is (re-saved), then goes. The
// coordinator's event key set is the real adapters/secretkey.Cache over a
// simulated Secrets Manager on the seeds of this kind (its alarm wired as
// functions/coordinator/main.go wires it), with a TTL of one minute; the
// producers send a plan again while the value is malformed, so that the
// set is read. Checks (what the fix of issue 25 finding 7 guarantees):
// every read of the malformed value logs secretkey.reload_failed naming the
// secret's ARN (never its value) and writes one KeyReloadFailures metric,
// and the old set stays in use (nothing refused: the other checks). The
// window is put in a gap of the seed's other day-2 operations (a cold
// start reads the secret too, and fails on a malformed one: outside what
// the fix promises); a seed without such a gap skips the kind, counted in
// its operations. Draws from a stream of their own.
const Day2KeyReload = "key-reload"

const keyReloadStream = 0x6b657972_656c6f64

// simEventSecretARN is the event key secret's ARN in the simulation.
const simEventSecretARN = "arn:aws:secretsmanager:eu-central-1:000000000000:secret:sim-event-key-AbCdEf"

// keyReloadTTL is LOCALEFLOW_KEY_TTL on the seeds of the kind.
const keyReloadTTL = time.Minute

// keyReload is the kind's state on one seed.
type keyReload struct {
	malformed bool
	// reads counts reads of the secret, malformedReads those answered
	// with the malformed value.
	reads, malformedReads int
	metrics               bytes.Buffer
	newKey                []byte
}

// simSecrets is the simulated Secrets Manager holding the event key
// secret: the deployment's event key set, hex, comma separated (with a
// stray comma while malformed).
type simSecrets struct{ d *day2 }

func (s simSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	k := s.d.keyReload
	k.reads++
	parts := make([]string, 0, len(s.d.dep.eventKeys)+1)
	for _, key := range s.d.dep.eventKeys {
		parts = append(parts, hex.EncodeToString(key))
	}
	if k.malformed {
		k.malformedReads++
		if k.newKey != nil {
			parts = append([]string{hex.EncodeToString(k.newKey)}, parts...)
		}
		parts = append(parts, "")
	}
	return &secretsmanager.GetSecretValueOutput{ARN: in.SecretId, SecretString: aws.String(strings.Join(parts, ","))}, nil
}

// prepareKeyReload makes the coordinator's event key set the secret-backed
// cache (before attach's first cold start).
func (d *day2) prepareKeyReload() {
	if !d.on(Day2KeyReload) {
		return
	}
	d.keyReload = &keyReload{}
	d.dep.eventSM = simSecrets{d: d}
	d.dep.keyMetrics = &d.keyReload.metrics
}

// attachKeyReload schedules the malformed window in a gap of the seed's
// other day-2 operations (called last in attach).
func (d *day2) attachKeyReload(rel *Release, window time.Duration) {
	if d.keyReload == nil || len(rel.releases) == 0 {
		return
	}
	w := d.w
	rng := rand.New(rand.NewPCG(w.Seed, keyReloadStream))
	if !d.ttl() {
		// The first cold start with the secret-backed set (with a TTL
		// kind on, attach's own first cold start is that one).
		d.redeploy("event key set read from its secret (LOCALEFLOW_KEY_TTL=1m)")
	}
	length := keyReloadTTL + time.Duration(1+rng.IntN(4))*time.Minute
	// A cold start reads the secret too (and fails on a malformed value):
	// the window holds none of the seed's other day-2 operations. It
	// may run past the fault window by up to 8 min (the world runs at
	// least 10 min past it).
	var ops []time.Time
	for _, t := range w.timers {
		if strings.HasPrefix(t.name, "day-2 ") && t.name != "day-2 stray deliver" {
			ops = append(ops, t.at)
		}
	}
	var t1 time.Time
	for range 50 {
		c := w.start.Add(time.Minute + time.Duration(rng.Int64N(int64(window+7*time.Minute-length))))
		clear := true
		for _, at := range ops {
			if !at.Before(c) && !at.After(c.Add(length)) {
				clear = false
			}
		}
		if clear {
			t1 = c
			break
		}
	}
	if t1.IsZero() {
		d.op("key-reload skipped: no gap of %s between the seed's other day-2 operations", length)
		return
	}
	t2 := t1.Add(length)
	if !d.on(Day2EventKey) {
		d.keyReload.newKey = d.newKey("event-reload")
	}
	w.at(t1, "day-2 key-reload malformed", func() {
		d.keyReload.malformed = true
		d.op("event key secret written malformed (a stray comma), no redeploy")
	})
	// The producers keep sending: a plan again after the TTL, then every
	// 40 s while the value is malformed (each re-read after a failed one
	// waits 30 s).
	for at := t1.Add(keyReloadTTL + 15*time.Second); at.Before(t2); at = at.Add(40 * time.Second) {
		spec := rel.releases[rng.IntN(len(rel.releases))]
		w.at(at, "key-reload producer resend", func() {
			rel.bus.put(contract.DetailPlanAccepted, signedDetail(contract.DetailPlanAccepted, spec.plan.PlanPayload()))
		})
	}
	w.at(t2, "day-2 key-reload fixed", func() {
		k := d.keyReload
		k.malformed = false
		if k.newKey != nil {
			d.dep.eventKeys = append([][]byte{k.newKey}, d.dep.eventKeys...)
		}
		if k.malformedReads > 0 {
			d.op("event key secret fixed after %d re-reads of its malformed value", k.malformedReads)
		} else {
			d.op("event key secret fixed (no re-read while malformed)")
		}
	})
}

// checkKeyReload: every read of the malformed secret was loud.
func (d *day2) checkKeyReload(logs string) {
	k := d.keyReload
	if k == nil || k.malformedReads == 0 {
		return
	}
	logged := 0
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, secretkey.CodeReloadFailed) {
			continue
		}
		var l struct {
			Code   string `json:"code"`
			Secret string `json:"secret"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Code == secretkey.CodeReloadFailed && l.Secret == simEventSecretARN {
			logged++
		}
		if k.newKey != nil && strings.Contains(line, hex.EncodeToString(k.newKey)) {
			d.w.violate("day-2: a %s line carries the event key's value", secretkey.CodeReloadFailed)
		}
	}
	metrics := 0
	for _, line := range strings.Split(k.metrics.String(), "\n") {
		if strings.Contains(line, contract.MetricKeyReloadFailures) {
			metrics++
		}
	}
	if logged < k.malformedReads || metrics < k.malformedReads {
		d.w.violate("day-2: the event key secret was re-read %d times while malformed (a stray comma): %d %s lines naming %s, %d %s metrics; "+
			"want one of each per read (docs/runbook.md \"Key reload failed\")",
			k.malformedReads, logged, secretkey.CodeReloadFailed, simEventSecretARN, metrics, contract.MetricKeyReloadFailures)
	}
}

// secretKeyCache is one coordinator environment's event key set, read from
// the simulated secret as functions/coordinator/main.go reads it.
func secretKeyCache(d deployment, clock core.Clock, log *slog.Logger) (*secretkey.Cache, error) {
	src := secretkey.Source{Stem: config.KeyStem(config.KeyEvent), SecretARN: simEventSecretARN}
	cache, err := secretkey.NewCache(context.Background(), src, d.eventSM, strings.ToLower(config.KeyEvent),
		secretkey.MinBytes(16), keyReloadTTL, clock)
	if err != nil {
		return nil, err
	}
	return cache.Alarm(log, d.keyMetrics, "sim", "coordinator"), nil
}
