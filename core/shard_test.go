package core

import "testing"

// TestShardKeepsTheStoredMapping pins the partitions items already carry in
// deployed tables (FNV-32a of the key parts joined by NUL, mod shards),
// worked out independently of the Go implementation.
func TestShardKeepsTheStoredMapping(t *testing.T) {
	for _, c := range []struct {
		shards int
		key    []string
		want   int
	}{
		{8, []string{"evt-1"}, 4},
		{8, []string{"evt-2"}, 5},
		{8, []string{"evt-0042"}, 3},
		{8, []string{"E"}, 0},
		{8, []string{"release-2026-12-01"}, 3},
		{8, []string{"evt-1", "delivery"}, 4},
		{16, []string{"evt-1", "delivery"}, 12},
		{8, []string{"evt-1", "evidence#req-1"}, 0},
		{16, []string{"evt-1", "evidence#req-1"}, 8},
		{8, []string{"evt-2", "blocked"}, 1},
		{16, []string{"evt-2", "blocked"}, 9},
		{8, []string{"evt-0042", "job#j-7"}, 1},
	} {
		if got := Shard(c.shards, c.key...); got != c.want {
			t.Errorf("Shard(%d, %q) = %d, want %d", c.shards, c.key, got, c.want)
		}
	}
}

func TestShardSeparatesKeyParts(t *testing.T) {
	// The NUL separator keeps ("ab", "c") and ("a", "bc") apart from each
	// other and from "abc" as inputs; over many keys they must not all agree.
	differ := 0
	for i := range 64 {
		id := "evt-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if Shard(1<<20, id+"x", "y") != Shard(1<<20, id, "xy") {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("key parts joined without a separator")
	}
	if got := Shard(0, "evt-1"); got != 0 {
		t.Fatalf("Shard(0, ...) = %d, want 0", got)
	}
}
