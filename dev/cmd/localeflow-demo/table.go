package main

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// display shows the changes' progress: a table redrawn in place on a
// terminal, appended lines (only what changed) otherwise.
type display struct {
	out   io.Writer
	tty   bool
	width int
	start time.Time
	lines int
	last  map[string]string
}

// newDisplay draws on out; width > 0 clips the lines of the in-place
// table so that none wraps (a wrapped line breaks the redraw).
func newDisplay(out io.Writer, tty bool, width int, start time.Time) *display {
	return &display{out: out, tty: tty, width: width, start: start, last: map[string]string{}}
}

func pad(s string, n int) string {
	if w := utf8.RuneCountInString(s); w < n {
		return s + strings.Repeat(" ", n-w)
	}
	return s
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// rows renders the table body: three lines per change.
func rows(changes []change, views []view) []string {
	out := []string{"MONITOR = the poller watching the CMS lifecycle · RELEASE = the coordinator: evidence → approval → signed delivery", ""}
	for i, c := range changes {
		v := views[i]
		mark := "• "
		switch {
		case v.Final && v.OK:
			mark = "✔ "
		case v.Final:
			mark = "✘ "
		}
		out = append(out,
			mark+pad(shortID(c.EventID), 18)+pad(c.SiteID, 14)+pad(strings.Join(c.Locales(), ","), 19)+c.Story,
			"    monitor: "+v.Monitor,
			"    release: "+v.Release)
	}
	return out
}

// shortID drops the run prefix for the table.
func shortID(id string) string {
	parts := strings.SplitN(id, "-", 3)
	if len(parts) == 3 {
		return "evt-…-" + parts[2]
	}
	return id
}

// show draws the current state; footer is one status line.
func (d *display) show(changes []change, views []view, footer string) {
	elapsed := time.Since(d.start).Truncate(100 * time.Millisecond)
	if d.tty {
		var b strings.Builder
		if d.lines > 0 {
			fmt.Fprintf(&b, "\x1b[%dA", d.lines)
		}
		lines := append(rows(changes, views), "", fmt.Sprintf("[%5.1fs] %s", elapsed.Seconds(), footer))
		for _, l := range lines {
			if d.width > 1 {
				l = clip(l, d.width-1)
			}
			b.WriteString("\x1b[2K" + l + "\n")
		}
		d.lines = len(lines)
		_, _ = io.WriteString(d.out, b.String())
		return
	}
	for i, c := range changes {
		line := "monitor: " + views[i].Monitor + " | release: " + views[i].Release
		if d.last[c.EventID] == line {
			continue
		}
		d.last[c.EventID] = line
		fmt.Fprintf(d.out, "[%5.1fs] %-22s %s\n", elapsed.Seconds(), shortID(c.EventID), line)
	}
}
