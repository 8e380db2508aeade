package monitordb

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core/lifecycle"
)

// The lifecycle attribute holds the canonical lifecycle snapshot as a B
// attribute: the byte snapshotFormatDeflate, then the raw DEFLATE stream
// (RFC 1951) of the canonical JSON with snapshotDictionary as the preset
// dictionary. It decodes to the canonical bytes, checked against
// lifecycle_sha256 by validation. The compact form keeps the item of a watched change under
// 1 KB (one write unit per claim and per finishing write); the snapshot
// is otherwise the largest attribute of the item.
const snapshotFormatDeflate = 1

// snapshotDictionary primes DEFLATE with the keys and constant values of a
// canonical lifecycle snapshot (the answer's identity and request id are
// the only long literals left). It is part of the stored format: items
// written with it are read with it, so it never changes; another
// dictionary needs another format byte.
const snapshotDictionary = `{"sha256":"` +
	`awaiting_approval","cancelled","deleted","deleting","deletion_failed","localization_failed",` +
	`"publication_blocked","publication_failed","publishing","queue_recovery","ready","superseded",` +
	`"published"],"blocked_locales":[],"delivery":null,` +
	`{"approved_locales":[],"blocked_locales":[],"delivery":null,"event_id":"evt-","plan_id":"plan-",` +
	`"queue_counts":{},"request_id":"req-","required_locales":["de-DE","fr-FR"],` +
	`"schema":"localeflow.cms-lifecycle.v1","site_id":"site-","source_sequence":1,` +
	`"status":"processing","tombstone":null,"website_version":"v1"}`

var snapshotWriters = sync.Pool{New: func() any {
	w, err := flate.NewWriterDict(io.Discard, flate.BestCompression, []byte(snapshotDictionary))
	if err != nil {
		// Only an invalid level fails, and the level is a constant.
		panic(err)
	}
	return w
}}

var snapshotReaders = sync.Pool{New: func() any {
	return flate.NewReaderDict(bytes.NewReader(nil), []byte(snapshotDictionary))
}}

// encodeSnapshot is the stored (compact) form of a canonical snapshot: the
// value of a B attribute.
func encodeSnapshot(canonical []byte) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte(snapshotFormatDeflate)
	w := snapshotWriters.Get().(*flate.Writer)
	defer snapshotWriters.Put(w)
	w.Reset(&b)
	if _, err := w.Write(canonical); err != nil {
		return nil, fmt.Errorf("monitordb: compress snapshot: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("monitordb: compress snapshot: %w", err)
	}
	return b.Bytes(), nil
}

var errSnapshot = errors.New("monitordb: stored snapshot does not decode")

// decodeSnapshot reads the stored form; another attribute type, an unknown
// format, a stream
// that does not inflate, one larger than lifecycle.MaxSnapshotBytes, or
// any byte after the end of the DEFLATE stream is an error (the record is
// corrupt: nothing may ride along after the snapshot, unchecked).
func decodeSnapshot(av types.AttributeValue) ([]byte, error) {
	switch v := av.(type) {
	case *types.AttributeValueMemberB:
		if len(v.Value) < 2 || v.Value[0] != snapshotFormatDeflate {
			return nil, errSnapshot
		}
		r := snapshotReaders.Get().(io.ReadCloser)
		defer snapshotReaders.Put(r)
		// A bytes.Reader is an io.ByteReader, so inflate reads it byte by
		// byte and stops at the end of the final block: what is left
		// unread is trailing bytes.
		src := bytes.NewReader(v.Value[1:])
		if err := r.(flate.Resetter).Reset(src, []byte(snapshotDictionary)); err != nil {
			return nil, errSnapshot
		}
		out, err := io.ReadAll(io.LimitReader(r, lifecycle.MaxSnapshotBytes+1))
		if err != nil || len(out) == 0 || len(out) > lifecycle.MaxSnapshotBytes || src.Len() != 0 {
			return nil, errSnapshot
		}
		return out, nil
	}
	return nil, errSnapshot
}
