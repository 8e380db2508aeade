package runner

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/localeflow/localeflow/contract"
)

// Schedule is one EventBridge rate schedule targeting a function.
type Schedule struct {
	// Name is the rule name; RuleARN goes into the event's resources.
	Name    string
	RuleARN string
	Account string
	Region  string
	// Every is the interval between invocations (the topology's rate, or
	// shorter to accelerate a demo).
	Every   time.Duration
	Invoker Invoker
	// Timeout of one invocation (default DefaultTimeout).
	Timeout time.Duration
	Log     *slog.Logger
	// Clock returns the event time (time.Now when nil).
	Clock func() time.Time
	// OnFire, if set, is called after every invocation with its response.
	OnFire func(resp []byte, err error)

	fired atomic.Int64
}

// Fired returns how many invocations the schedule made.
func (s *Schedule) Fired() int64 { return s.fired.Load() }

// ScheduledEvent returns the EventBridge "Scheduled Event" JSON for a rule.
func ScheduledEvent(ruleARN, account, region string, at time.Time) ([]byte, error) {
	id, err := uuid()
	if err != nil {
		return nil, err
	}
	if account == "" {
		account = "000000000000"
	}
	if region == "" {
		region = "us-east-1"
	}
	return json.Marshal(map[string]any{
		"version": "0", "id": id, "detail-type": contract.ScheduledEventDetailType, "source": contract.ScheduledEventSource,
		"account": account, "time": at.UTC().Format(time.RFC3339), "region": region,
		"resources": []string{ruleARN}, "detail": map[string]any{},
	})
}

// Fire invokes the function once with a scheduled event.
func (s *Schedule) Fire(ctx context.Context) ([]byte, error) {
	now := time.Now
	if s.Clock != nil {
		now = s.Clock
	}
	payload, err := ScheduledEvent(s.RuleARN, s.Account, s.Region, now())
	if err != nil {
		return nil, err
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := s.Invoker.Invoke(ictx, payload)
	s.fired.Add(1)
	if s.OnFire != nil {
		s.OnFire(out, err)
	}
	return out, err
}

// Run fires the schedule every Every until ctx ends, the first time after
// one interval (as a new rate rule does).
func (s *Schedule) Run(ctx context.Context) error {
	if s.Invoker == nil || s.Every <= 0 || s.RuleARN == "" {
		return errors.New("runner: schedule needs Invoker, Every > 0 and RuleARN")
	}
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := s.Fire(ctx); err != nil && ctx.Err() == nil {
			log.Warn("runner scheduled invocation failed", "schedule", s.Name, "error", err.Error())
		}
	}
}

func uuid() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("runner: event id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
