package releasetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
)

// MemStore is an in-memory release.Store with the same compare-and-swap
// semantics as the DynamoDB store. Records are kept as JSON so callers can
// never alias stored state.
type MemStore struct {
	mu     sync.Mutex
	items  map[string]map[string]stored
	puts   int
	loads  int
	failOn func(rec release.Record) error
	// retention is the store's record retention (release.ExpiresAt).
	retention time.Duration
}

type stored struct {
	version int64
	// raw is the stored JSON, schema_version included.
	raw []byte
	// expiresAt is the TTL the DynamoDB store would write (epoch seconds,
	// 0: none).
	expiresAt int64
}

var _ release.Store = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{items: map[string]map[string]stored{}, retention: release.DefaultRetention}
}

// SetRetention sets the retention of content-free records (≤ 0: none).
func (m *MemStore) SetRetention(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.retention = d
}

// ExpiresAt returns the expiry (epoch seconds) of the stored record, as
// release.ExpiresAt computed it when it was written.
func (m *MemStore) ExpiresAt(_ context.Context, eventID, sk string) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.items[eventID][sk]
	if !ok {
		return 0, false, fmt.Errorf("memstore: no record %s %s", eventID, sk)
	}
	return s.expiresAt, s.expiresAt != 0, nil
}

func (m *MemStore) expiry(rec release.Record) int64 {
	if src, ok := rec.(*release.SourceRecord); ok && src.ExpiresAt != 0 {
		// Written as the record's own attribute, as the DynamoDB store does.
		return src.ExpiresAt
	}
	at, _ := release.ExpiresAt(rec, m.retention)
	return at
}

// DeleteTexts deletes the event's source and result records, as
// DynamoDB's TTL does once their retention ran out (docs/design.md
// "Retention"); it returns how many it deleted.
func (m *MemStore) DeleteTexts(eventID string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for sk := range m.items[eventID] {
		if strings.HasPrefix(sk, release.SKSourcePrefix) || strings.HasPrefix(sk, release.SKResultPrefix) {
			delete(m.items[eventID], sk)
			n++
		}
	}
	return n
}

// FailPuts makes Put return the error f returns (nil: write normally); a
// fault-injection hook for tests.
func (m *MemStore) FailPuts(f func(rec release.Record) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failOn = f
}

// Counts returns how many Loads and successful Puts ran.
func (m *MemStore) Counts() (loads, puts int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.loads, m.puts
}

var _ Foreign = (*MemStore)(nil)

// PutForeign implements Foreign: rec's stored JSON with schema_version
// set to schemaVersion (0: left out), bypassing every check.
func (m *MemStore) PutForeign(_ context.Context, rec release.Record, schemaVersion int) error {
	raw, err := encode(rec)
	if err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	delete(fields, release.AttrSchemaVersion)
	if schemaVersion != 0 {
		fields[release.AttrSchemaVersion] = json.RawMessage(strconv.Itoa(schemaVersion))
	}
	if raw, err = json.Marshal(fields); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	eventID, sk := rec.Key()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.items[eventID] == nil {
		m.items[eventID] = map[string]stored{}
	}
	m.items[eventID][sk] = stored{version: rec.RecordVersion(), raw: raw}
	return nil
}

// Stored implements Foreign: the stored JSON (nil when absent).
func (m *MemStore) Stored(_ context.Context, eventID, sk string) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.items[eventID][sk]
	if !ok {
		return nil, nil
	}
	return string(s.raw), nil
}

// Raw returns the stored JSON of every record of eventID by sort key, for
// content-free checks.
func (m *MemStore) Raw(eventID string) map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]byte{}
	for sk, s := range m.items[eventID] {
		out[sk] = append([]byte(nil), s.raw...)
	}
	return out
}

// Put implements release.Store.
func (m *MemStore) Put(_ context.Context, rec release.Record, prev int64) error {
	eventID, sk := rec.Key()
	if !core.ValidToken(eventID) || sk == "" || rec.RecordVersion() != prev+1 {
		return core.Fail(release.CodeRecordInvalid)
	}
	raw, err := encode(rec)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failOn != nil {
		if err := m.failOn(rec); err != nil {
			return err
		}
	}
	coll := m.items[eventID]
	if coll == nil {
		coll = map[string]stored{}
		m.items[eventID] = coll
	}
	cur, exists := coll[sk]
	if (prev == 0 && exists) || (prev != 0 && (!exists || cur.version != prev || !currentSchema(cur.raw))) {
		return release.ErrConflict
	}
	coll[sk] = stored{version: rec.RecordVersion(), raw: raw, expiresAt: m.expiry(rec)}
	m.puts++
	return nil
}

// PutAll implements release.Store: every write or none, under one lock.
func (m *MemStore) PutAll(_ context.Context, writes ...release.Write) error {
	if err := release.ValidWrites(writes); err != nil {
		return err
	}
	raws := make([][]byte, len(writes))
	for i, w := range writes {
		raw, err := encode(w.Rec)
		if err != nil {
			return err
		}
		raws[i] = raw
	}
	eventID, _ := writes[0].Rec.Key()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failOn != nil {
		for _, w := range writes {
			if err := m.failOn(w.Rec); err != nil {
				return err
			}
		}
	}
	coll := m.items[eventID]
	for _, w := range writes {
		_, sk := w.Rec.Key()
		cur, exists := coll[sk]
		if (w.Prev == 0 && exists) || (w.Prev != 0 && (!exists || cur.version != w.Prev || !currentSchema(cur.raw))) {
			return release.ErrConflict
		}
	}
	if coll == nil {
		coll = map[string]stored{}
		m.items[eventID] = coll
	}
	for i, w := range writes {
		_, sk := w.Rec.Key()
		coll[sk] = stored{version: w.Rec.RecordVersion(), raw: raws[i], expiresAt: m.expiry(w.Rec)}
	}
	m.puts++
	return nil
}

// Load implements release.Store.
func (m *MemStore) Load(_ context.Context, eventID string) (release.Snapshot, error) {
	return m.load(eventID, func(string) bool { return true })
}

// LoadState implements release.Store.
func (m *MemStore) LoadState(_ context.Context, eventID string) (release.Snapshot, error) {
	// The sort keys below "result#", as the DynamoDB Query reads them:
	// every kind but the texts and the tally, which sort after them.
	return m.load(eventID, func(sk string) bool { return sk < release.SKResultPrefix })
}

// LoadKeys implements release.Store.
func (m *MemStore) LoadKeys(_ context.Context, eventID string, sortKeys ...string) (release.Snapshot, error) {
	if len(sortKeys) > release.MaxLoadKeys {
		return release.Snapshot{}, core.Fail(release.CodeRecordInvalid)
	}
	want := map[string]bool{}
	for _, sk := range sortKeys {
		want[sk] = true
	}
	return m.load(eventID, func(sk string) bool { return want[sk] })
}

// LoadPrefix implements release.Store.
func (m *MemStore) LoadPrefix(_ context.Context, eventID, prefix string) (release.Snapshot, error) {
	if prefix == "" {
		return release.Snapshot{}, core.Fail(release.CodeRecordInvalid)
	}
	return m.load(eventID, func(sk string) bool { return strings.HasPrefix(sk, prefix) })
}

func (m *MemStore) load(eventID string, keep func(sk string) bool) (release.Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loads++
	snap := release.NewSnapshot()
	keys := make([]string, 0, len(m.items[eventID]))
	for sk := range m.items[eventID] {
		if keep(sk) {
			keys = append(keys, sk)
		}
	}
	sort.Strings(keys)
	for _, sk := range keys {
		s := m.items[eventID][sk]
		rec, err := Decode(sk, s.raw)
		if err != nil {
			return release.Snapshot{}, err
		}
		if err := release.OpenStored(rec, eventID); err != nil {
			return release.Snapshot{}, err
		}
		if src, ok := rec.(*release.SourceRecord); ok {
			// The TTL attribute, read back as the DynamoDB store decodes it.
			src.ExpiresAt = s.expiresAt
		}
		snap.Add(rec)
	}
	return snap, nil
}

// encode is the stored JSON of rec: of its release.StoredForm with
// schema_version (release.SchemaVersion), as the DynamoDB store writes its
// attributes.
func encode(rec release.Record) ([]byte, error) {
	form, err := release.StoredForm(rec)
	if err != nil {
		return nil, err
	}
	_, sk := rec.Key()
	raw, err := json.Marshal(form)
	if err != nil {
		return nil, fmt.Errorf("memstore: encode %s: %w", sk, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("memstore: encode %s: %w", sk, err)
	}
	fields[release.AttrSchemaVersion] = json.RawMessage(strconv.Itoa(release.SchemaVersion))
	raw, err = json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("memstore: encode %s: %w", sk, err)
	}
	return raw, nil
}

// currentSchema says whether stored JSON carries schema_version
// release.SchemaVersion.
func currentSchema(raw []byte) bool {
	var v struct {
		SchemaVersion *json.Number `json:"schema_version"`
	}
	return json.Unmarshal(raw, &v) == nil && v.SchemaVersion != nil && v.SchemaVersion.String() == strconv.Itoa(release.SchemaVersion)
}

// Decode returns an empty record of the kind sk names, decoded from its
// stored JSON (not completed: load completes it with release.OpenStored).
// A record whose schema_version is missing or not release.SchemaVersion
// is refused (release.CodeSchemaUnsupported).
func Decode(sk string, raw []byte) (release.Record, error) {
	if !currentSchema(raw) {
		return nil, core.Fail(release.CodeSchemaUnsupported)
	}
	return decodeFields(sk, raw)
}

// decodeFields decodes the record's fields whatever its schema version
// (the index pages read only index fields, as DynamoDB's indexes do).
func decodeFields(sk string, raw []byte) (release.Record, error) {
	rec := release.NewRecord(sk)
	if rec == nil {
		return nil, core.Fail(release.CodeRecordInvalid)
	}
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, core.Wrap(release.CodeRecordInvalid, false, err)
	}
	return rec, nil
}

var _ release.DueFinder = (*MemStore)(nil)

// Due implements release.DueFinder over the stored records.
func (m *MemStore) Due(_ context.Context, toMS int64, cursor string, limit int) (release.DuePage, error) {
	entries, next, err := m.page(func(rec release.Record) (int64, bool) {
		ms, wakes, _, _ := release.Wake(rec)
		return ms, wakes
	}, toMS, cursor, limit)
	if err != nil {
		return release.DuePage{}, err
	}
	out := release.DuePage{Next: next}
	for _, e := range entries {
		out.Items = append(out.Items, release.DueItem{EventID: e.EventID, Delivery: e.SK == release.SKDelivery, WakeMS: e.MS})
	}
	return out, nil
}

// indexEntry is one record of a sparse index, ordered by (ms, event, key).
type indexEntry struct {
	MS      int64  `json:"ms"`
	EventID string `json:"e"`
	SK      string `json:"k"`
}

func (a indexEntry) less(b indexEntry) bool {
	if a.MS != b.MS {
		return a.MS < b.MS
	}
	if a.EventID != b.EventID {
		return a.EventID < b.EventID
	}
	return a.SK < b.SK
}

// page returns up to limit entries of the index that keys defines with ms
// at most toMS, after cursor (the JSON of the last entry of the previous
// page), and the next cursor ("" after the last page).
func (m *MemStore) page(keys func(release.Record) (int64, bool), toMS int64, cursor string, limit int) ([]indexEntry, string, error) {
	if limit <= 0 {
		return nil, "", core.Fail(release.CodeStorePageInvalid)
	}
	var after *indexEntry
	if cursor != "" {
		var c indexEntry
		if err := json.Unmarshal([]byte(cursor), &c); err != nil {
			return nil, "", core.Wrap(release.CodeStoreCursorInvalid, false, err)
		}
		after = &c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []indexEntry
	for eventID, coll := range m.items {
		for sk, s := range coll {
			rec, err := decodeFields(sk, s.raw)
			if err != nil {
				return nil, "", err
			}
			ms, ok := keys(rec)
			e := indexEntry{MS: ms, EventID: eventID, SK: sk}
			if ok && ms <= toMS && (after == nil || after.less(e)) {
				all = append(all, e)
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].less(all[j]) })
	if len(all) <= limit {
		return all, "", nil
	}
	all = all[:limit]
	next, err := json.Marshal(all[limit-1])
	if err != nil {
		return nil, "", fmt.Errorf("memstore: cursor: %w", err)
	}
	return all, string(next), nil
}
