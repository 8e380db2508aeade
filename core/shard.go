package core

import "hash/fnv"

// Shard is the partition, in [0, shards), of the sparse index entry keyed
// by key: FNV-32a of the key's parts joined by a NUL byte, mod shards. A
// monitor record is keyed by its event id alone, a release record by its
// event id and sort key. The mapping is stored in every indexed item, so it
// never changes. shards below 1 puts everything in partition 0.
func Shard(shards int, key ...string) int {
	if shards < 1 {
		return 0
	}
	h := fnv.New32a()
	for i, part := range key {
		if i > 0 {
			_, _ = h.Write([]byte{0})
		}
		_, _ = h.Write([]byte(part))
	}
	return int(h.Sum32() % uint32(shards))
}
