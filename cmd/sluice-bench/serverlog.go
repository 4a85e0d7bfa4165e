package main

import (
	"fmt"
	"os"
	"strings"
)

// logSize is the current length of sluice's log.
func (s *server) logSize() int64 {
	fi, err := os.Stat(s.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logProblems summarises the WARN and ERROR lines sluice logged after
// offset from: how many, and the first of each level.
func (s *server) logProblems(from int64) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil || int64(len(b)) <= from {
		return ""
	}
	var parts []string
	for _, level := range []string{"ERROR", "WARN"} {
		n, first := 0, ""
		for _, line := range strings.Split(string(b[from:]), "\n") {
			if strings.Contains(line, "level="+level) {
				if n++; first == "" {
					first = line
				}
			}
		}
		if n > 0 {
			if len(first) > 300 {
				first = first[:300] + "…"
			}
			parts = append(parts, fmt.Sprintf("sluice logged %d %s line(s), first: `%s`", n, level, first))
		}
	}
	return strings.Join(parts, "; ")
}

// logTail returns the last n lines of sluice's log.
func (s *server) logTail(n int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
