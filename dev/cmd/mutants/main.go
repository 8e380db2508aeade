// Command mutants runs the mutation harness (make mutants): it applies each
// mutant of dev/mutants.List, one at a time, to a temporary copy of its
// file, builds the simulation with `go test -c -overlay` (the checkout is
// never modified), runs the mutant's block of seeds (TestSimSeeds' default
// block, or TestSimAdapterSeeds' for the DynamoDB adapters) in chunks,
// stops at the first failing chunk, and reports caught / survived / hang
// with the first failing seed, as a Markdown table.
//
//	go run ./dev/cmd/mutants                       # every mutant
//	go run ./dev/cmd/mutants -only a,b -jobs 2     # some, two chunks at a time
//	go run ./dev/cmd/mutants -check -root DIR      # only check the anchors in DIR
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/localeflow/localeflow/dev/mutants"
)

type options struct {
	root         string
	only         map[string]bool
	jobs         int
	chunk        int
	defaultSeeds int
	adapterSeeds int
	timeout      time.Duration
	out          string
	baseline     bool
}

func main() {
	var o options
	var only string
	check := flag.Bool("check", false, "only check that every mutant applies (anchors found, result parses)")
	flag.StringVar(&o.root, "root", "", "repository root (default: the one above the working directory)")
	flag.StringVar(&only, "only", "", "comma-separated mutant ids to run (default: all)")
	flag.IntVar(&o.jobs, "jobs", 1, "chunks of seeds run at once per mutant")
	flag.IntVar(&o.chunk, "chunk", 25, "seeds per test process")
	flag.IntVar(&o.defaultSeeds, "seeds", 500, "seeds of the default block (from 1)")
	flag.IntVar(&o.adapterSeeds, "adapter-seeds", 100, "seeds of the adapters block (from 1)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "a chunk running longer is a hang")
	flag.StringVar(&o.out, "out", "build/mutants.md", "where the table is written (also printed)")
	flag.BoolVar(&o.baseline, "baseline", true, "run the unmutated blocks first (a failing baseline makes every verdict meaningless)")
	flag.Parse()
	if o.root == "" {
		wd, err := os.Getwd()
		if err == nil {
			o.root, err = mutants.Root(wd)
		}
		if err != nil {
			fail(err)
		}
	}
	if only != "" {
		o.only = map[string]bool{}
		for _, id := range strings.Split(only, ",") {
			o.only[strings.TrimSpace(id)] = true
		}
	}
	if *check {
		bad := 0
		for _, m := range mutants.List {
			if _, err := m.Apply(o.root); err != nil {
				fmt.Println(err)
				bad++
			}
		}
		fmt.Printf("%d of %d mutants apply in %s\n", len(mutants.List)-bad, len(mutants.List), o.root)
		if bad > 0 {
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mutants:", err)
	os.Exit(1)
}

// verdict is one mutant's result.
type verdict struct {
	m       mutants.Mutant
	status  string // caught, survived, hang, build-failed, equivalent
	seed    string // the first failing seed (caught)
	detail  string
	elapsed time.Duration
}

func run(o options) error {
	tmp, err := os.MkdirTemp("", "localeflow-mutants-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	var results []verdict
	fmt.Printf("== mutation run in %s (load %s)\n", o.root, loadavg())
	if o.baseline {
		bin := filepath.Join(tmp, "baseline.test")
		if out, err := build(o.root, "", bin); err != nil {
			return fmt.Errorf("the unmutated simulation does not build: %w\n%s", err, out)
		}
		for _, block := range []string{"default", "adapters"} {
			v := runBlock(o, bin, block)
			fmt.Printf("== baseline %s block: %s %s (%s)\n", block, v.status, v.seed, v.elapsed.Round(time.Second))
			if v.status != "survived" {
				return fmt.Errorf("the unmutated %s block fails (%s, seed %s): fix that first (or pass -baseline=false knowingly)\n%s", block, v.status, v.seed, v.detail)
			}
		}
	}
	for i, m := range mutants.List {
		if o.only != nil && !o.only[m.ID] {
			continue
		}
		t0 := time.Now()
		v := verdict{m: m}
		if m.Equivalent != "" {
			v.status = "equivalent"
		} else {
			v = runMutant(o, tmp, i, m)
		}
		v.elapsed = time.Since(t0)
		results = append(results, v)
		fmt.Printf("%-40s %-12s %-8s %6s  %s\n", m.ID, v.status, v.seed, v.elapsed.Round(time.Second), firstLine(v.detail))
	}
	table := report(results, time.Since(start))
	fmt.Print(table)
	if o.out != "" {
		path := o.out
		if !filepath.IsAbs(path) {
			path = filepath.Join(o.root, path)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			_ = os.WriteFile(path, []byte(table), 0o644)
		}
	}
	return nil
}

func runMutant(o options, tmp string, i int, m mutants.Mutant) verdict {
	v := verdict{m: m}
	content, err := m.Apply(o.root)
	if err != nil {
		v.status, v.detail = "build-failed", err.Error()
		return v
	}
	dir := filepath.Join(tmp, fmt.Sprintf("m%02d", i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		v.status, v.detail = "build-failed", err.Error()
		return v
	}
	mutated := filepath.Join(dir, filepath.Base(m.File))
	overlay := filepath.Join(dir, "overlay.json")
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(o.root, m.File): mutated}})
	if err := errors.Join(os.WriteFile(mutated, content, 0o644), os.WriteFile(overlay, ov, 0o644)); err != nil {
		v.status, v.detail = "build-failed", err.Error()
		return v
	}
	bin := filepath.Join(dir, "sim.test")
	if out, err := build(o.root, overlay, bin); err != nil {
		v.status, v.detail = "build-failed", strings.TrimSpace(out)
		return v
	}
	defer os.RemoveAll(dir)
	v = runBlock(o, bin, m.Block())
	v.m = m
	return v
}

func build(root, overlay, bin string) (string, error) {
	args := []string{"test", "-c", "-o", bin}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	args = append(args, "./dev/proof/sim")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// chunkResult is one test process over seeds [from, from+n).
type chunkResult struct {
	from, n int
	failed  bool
	hang    bool
	seed    string
	out     string
}

var (
	seedFailed = regexp.MustCompile(`seed (\d+) failed`)
	seedLine   = regexp.MustCompile(`seed (\d+)[: ]`)
)

// runBlock runs a block in chunks, o.jobs at a time, in seed order, and
// stops at the first failing chunk (after the chunks before it finished,
// so the first failing seed is the block's first).
func runBlock(o options, bin, block string) verdict {
	t0 := time.Now()
	total := o.defaultSeeds
	if block == "adapters" {
		total = o.adapterSeeds
	}
	var chunks []*chunkResult
	for from := 1; from <= total; from += o.chunk {
		chunks = append(chunks, &chunkResult{from: from, n: min(o.chunk, total-from+1)})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	firstBad := len(chunks)
	next := 0
	var wg sync.WaitGroup
	for range max(o.jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= len(chunks) || next > firstBad {
					mu.Unlock()
					return
				}
				c := chunks[next]
				idx := next
				next++
				mu.Unlock()
				runChunk(ctx, o, bin, block, c)
				if c.failed || c.hang {
					mu.Lock()
					if idx < firstBad {
						firstBad = idx
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	v := verdict{elapsed: time.Since(t0), status: "survived"}
	if firstBad < len(chunks) {
		c := chunks[firstBad]
		v.detail = violation(c.out) + "\n" + tail(c.out, 40)
		switch {
		case c.hang:
			v.status, v.seed = "hang", fmt.Sprintf("%d–%d", c.from, c.from+c.n-1)
		default:
			v.status, v.seed = "caught", c.seed
		}
	}
	return v
}

func runChunk(ctx context.Context, o options, bin, block string, c *chunkResult) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	args := []string{"-test.run", "^TestSimSeeds$", "-test.timeout", "0", "-sim.reports", "1",
		"-sim.start", strconv.Itoa(c.from), "-sim.seeds", strconv.Itoa(c.n)}
	if block == "adapters" {
		args = []string{"-test.run", "^TestSimAdapterSeeds$", "-test.timeout", "0", "-sim.reports", "1",
			"-sim.adapters.start", strconv.Itoa(c.from), "-sim.adapters.seeds", strconv.Itoa(c.n)}
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = filepath.Dir(bin)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	c.out = buf.String()
	if ctx.Err() == context.DeadlineExceeded {
		c.hang = true
		return
	}
	if err == nil {
		return
	}
	c.failed = true
	c.seed = fmt.Sprintf("%d–%d (no seed named)", c.from, c.from+c.n-1)
	if m := seedFailed.FindStringSubmatch(c.out); m != nil {
		c.seed = m[1]
	} else if m := seedLine.FindStringSubmatch(c.out); m != nil {
		c.seed = m[1]
	} else if strings.Contains(c.out, "panic:") {
		c.seed = fmt.Sprintf("%d–%d (panic)", c.from, c.from+c.n-1)
	}
}

func report(results []verdict, elapsed time.Duration) string {
	var b strings.Builder
	counts := map[string]int{}
	for _, v := range results {
		counts[v.status]++
	}
	judged := counts["caught"] + counts["survived"] + counts["hang"]
	killed := counts["caught"] + counts["hang"]
	rate := 0.0
	if judged > 0 {
		rate = 100 * float64(killed) / float64(judged)
	}
	fmt.Fprintf(&b, "\n| mutant | area | block | verdict | first failing seed | what it breaks |\n|---|---|---|---|---|---|\n")
	for _, v := range results {
		what := v.m.What
		if v.status == "equivalent" {
			what += " — equivalent: " + v.m.Equivalent
		}
		if v.status == "build-failed" {
			what += " — " + firstLine(v.detail)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", v.m.ID, v.m.Area(), v.m.Block(), v.status, v.seed, strings.ReplaceAll(what, "|", "\\|"))
	}
	fmt.Fprintf(&b, "\n%d mutants: %d caught, %d hang, %d survived, %d equivalent, %d build-failed; killed %d of %d (%.0f %%), %s, load %s\n",
		len(results), counts["caught"], counts["hang"], counts["survived"], counts["equivalent"], counts["build-failed"],
		killed, judged, rate, elapsed.Round(time.Second), loadavg())
	// The score of each set apart (mutants.Mutant.Set): the ones written
	// before the checks that judge them cannot have been tuned to them.
	sets := map[string][2]int{}
	for _, v := range results {
		if v.status != "caught" && v.status != "hang" && v.status != "survived" {
			continue
		}
		k := sets[v.m.Set]
		if v.status != "survived" {
			k[0]++
		}
		k[1]++
		sets[v.m.Set] = k
	}
	for _, set := range []string{"", mutants.SetBeforeChecks} {
		if k, ok := sets[set]; ok {
			name := set
			if name == "" {
				name = "written with or after their checks"
			}
			fmt.Fprintf(&b, "set %s: killed %d of %d\n", name, k[0], k[1])
		}
	}
	return b.String()
}

func loadavg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "===") && !strings.HasPrefix(l, "---") {
			if len(l) > 160 {
				l = l[:160]
			}
			return l
		}
	}
	return ""
}

// violation is the first violation a failing chunk printed.
func violation(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "VIOLATION"); i >= 0 {
			return strings.TrimSpace(l[i+len("VIOLATION"):])
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "panic:") || strings.Contains(l, "FAIL") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
